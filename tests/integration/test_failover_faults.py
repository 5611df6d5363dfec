"""Failover: each fault of the proxy on the preferred endpoint, one real anvil behind both.

For every fault the watcher must never issue a wrong verdict (the confirmed block is the
node's real block), must mark the faulty endpoint in its health, and must use it again once
the fault ends.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from guard.settlement import Verdict
from tests.integration.helpers import wait_included
from tests.integration.quorum_helpers import MultiRig, multi_rig
from tests.support.anvil import Anvil


@pytest.fixture
def rig(anvil: Anvil, tmp_path: Path) -> Iterator[MultiRig]:
    # Faults are about the node, not the store: SQLite only keeps the suite fast.
    r = multi_rig(anvil, f"sqlite:///{tmp_path}/f.db", quorum=1)
    r.watcher.poll()  # at the node's head before anything is sent
    yield r
    r.close()


@pytest.mark.parametrize("fault", ["drop", "http_500", "rpc_error", "malformed", "chain_id"])
def test_fault_on_preferred_endpoint_fails_over_and_recovers(rig: MultiRig, fault: str) -> None:
    bad, good = rig.proxies
    bad.inject(fault)
    tx = rig.anvil.send()
    block = wait_included(rig.anvil, tx)
    rec = rig.register(tx)
    rig.mine_and_poll(3)
    done = rig.settlement(rec.settlement_id)
    assert done.verdict == Verdict.FINALITY_CONFIRMED
    assert done.block_number == block
    assert done.block_hash == rig.anvil.block(block)["hash"]
    health = {h["endpoint"]: h for h in rig.multi.health_report()}
    assert rig.multi.health[0].errors >= 1
    assert health[bad.url]["state"] in ("open", "half_open", "wrong_chain")
    assert health[good.url]["active"] is True
    # The fault ends: after the backoff the preferred endpoint is probed and used again.
    bad.clear()
    time.sleep(0.5)
    calls_before = bad.total()
    rig.transport_prefer_first()
    rig.mine_and_poll(1)
    assert bad.total() > calls_before
    assert {h["endpoint"]: h for h in rig.multi.health_report()}[bad.url]["state"] == "closed"


def test_slow_endpoint_still_gives_right_answers(rig: MultiRig) -> None:
    slow = rig.proxies[0]
    slow.delay_s = 0.3
    tx = rig.anvil.send()
    block = wait_included(rig.anvil, tx)
    rec = rig.register(tx)
    rig.mine_and_poll(3)
    done = rig.settlement(rec.settlement_id)
    assert done.verdict == Verdict.FINALITY_CONFIRMED
    assert done.block_hash == rig.anvil.block(block)["hash"]
    latency = rig.multi.health_report()[0]["latency_ms"]
    assert isinstance(latency, float) and latency >= 250


def test_all_endpoints_down_then_back(rig: MultiRig) -> None:
    tx = rig.anvil.send()
    rec = rig.register(tx)
    for proxy in rig.proxies:
        proxy.http_500 = True
    rig.anvil.mine(3)
    with pytest.raises(Exception):  # noqa: B017 - any RpcError: the engine's poll fails
        rig.watcher.poll()
    assert rig.settlement(rec.settlement_id).verdict == Verdict.AWAITING_FINALITY
    for proxy in rig.proxies:
        proxy.clear()
    time.sleep(0.5)
    rig.watcher.catch_up()
    assert rig.settlement(rec.settlement_id).verdict == Verdict.FINALITY_CONFIRMED


def test_frozen_node_alone_is_lagging_not_a_reorg(rig: MultiRig) -> None:
    only = rig.proxies[0]
    rig.proxies[1].http_500 = True  # follow the faulty node alone
    tx = rig.anvil.send()
    rec = rig.register(tx)
    rig.watcher.catch_up()
    only.freeze_head()
    rig.anvil.mine(3)
    rig.watcher.catch_up()
    assert rig.settlement(rec.settlement_id).verdict == Verdict.AWAITING_FINALITY
    assert rig.store.reorgs() == []
    only.clear()
    rig.proxies[1].clear()
    rig.watcher.catch_up()
    assert rig.settlement(rec.settlement_id).verdict == Verdict.FINALITY_CONFIRMED
    assert rig.store.reorgs() == []


def test_node_going_backwards_is_unhealthy_not_a_reorg(rig: MultiRig) -> None:
    back = rig.proxies[0]
    tx = rig.anvil.send()
    block = wait_included(rig.anvil, tx)
    rec = rig.register(tx)
    rig.mine_and_poll(1)
    back.roll_back(2)
    for _ in range(5):
        rig.mine_and_poll(1)
    done = rig.settlement(rec.settlement_id)
    assert done.verdict == Verdict.FINALITY_CONFIRMED  # read on from the honest node
    assert done.block_hash == rig.anvil.block(block)["hash"]
    assert rig.store.reorgs() == []
    health = rig.multi.health[0]
    assert health.errors >= 1
    assert health.last_error is not None and "went backwards" in health.last_error
    assert rig.multi.health_report()[1]["active"] is True
