"""Stalled heads: the followed endpoint answers well but its head froze.

Real anvil nodes behind the project's fault proxy. When the followed node's head stops
while another endpoint's goes on, the watcher must move to the moving one (through the
normal tracker path: no reorg on the same chain, a reorg on another fork), show the frozen
one as ``stalled`` with the reason, use it again once it caught up, and change nothing when
no one is ahead (all stuck alike, or an idle chain), at one probe per period at most.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chains import pool
from chains.health import EndpointHealth
from chains.multi import MIN_STALL_S
from guard.settlement import Verdict
from tests.integration.helpers import wait_included
from tests.integration.quorum_helpers import MultiRig, multi_rig
from tests.support.anvil import Anvil

STALL_S = 0.5
"""A short stall period, so each test takes a few seconds."""

DEADLINE_S = 30.0
"""How long a poll loop may take to see the change: only a watcher that never gets there runs
into it. How soon it moves is bounded below (it waits out the stall period), not above: an
upper bound in wall-clock seconds only measures the machine's load."""


def _short_stall(rig: MultiRig) -> MultiRig:
    rig.multi.transport.stall_s = STALL_S
    return rig


@pytest.fixture
def rig(anvil: Anvil, tmp_path: Path) -> Iterator[MultiRig]:
    r = _short_stall(multi_rig(anvil, f"sqlite:///{tmp_path}/s.db", quorum=1))
    r.watcher.poll()  # at the node's head before anything is sent
    yield r
    r.close()


def _poll_until(rig: MultiRig, done: Callable[[], bool], within_s: float) -> float:
    """Poll every 50 ms until ``done()``; returns the seconds it took (fails past the deadline)."""
    started = time.monotonic()
    while not done():
        assert time.monotonic() - started < within_s, "not done in time"
        rig.watcher.poll()
        time.sleep(0.05)
    return time.monotonic() - started


def _poll_for(rig: MultiRig, seconds: float) -> None:
    """Poll every 50 ms for ``seconds`` (the engine's polling of a quiet chain)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rig.watcher.poll()
        time.sleep(0.05)


def test_frozen_active_endpoint_is_left_and_used_again_after(rig: MultiRig) -> None:
    frozen, moving = rig.proxies
    assert rig.multi.transport.active == 0
    tx = rig.anvil.send()
    block = wait_included(rig.anvil, tx)
    rec = rig.register(tx)
    rig.watcher.poll()
    at = frozen.freeze_head()
    rig.anvil.mine(3)  # enough for depth 3, seen only by the moving endpoint

    took = _poll_until(
        rig,
        lambda: rig.settlement(rec.settlement_id).verdict != Verdict.AWAITING_FINALITY,
        within_s=DEADLINE_S,
    )
    done = rig.settlement(rec.settlement_id)
    assert done.verdict == Verdict.FINALITY_CONFIRMED
    assert done.block_number == block
    assert done.block_hash == rig.anvil.block(block)["hash"]
    assert rig.store.reorgs() == []  # the new node's chain contains ours: no reorg
    assert took >= STALL_S * 0.8  # waited out the stall period, then moved
    report = {h["endpoint"]: h for h in rig.multi.health_report()}
    assert report[moving.url]["active"] is True
    assert report[frozen.url]["state"] == "stalled"
    reason = report[frozen.url]["stalled"]
    assert isinstance(reason, str)
    assert f"head {at} frozen for" in reason
    assert "127.0.0.1" in reason and f"is at {rig.anvil.head()}" in reason
    assert rig.multi.health[0].errors == 0  # stalled is not an error
    assert rig.multi.transport.stalls == 1

    # (b) The fault ends: after its backoff the endpoint is checked, found caught up, closed.
    frozen.clear()
    _poll_until(rig, lambda: rig.multi.health[0].state == "closed", within_s=DEADLINE_S)
    assert rig.multi.health[0].stalled is None and rig.multi.health[0].usable
    # ... and read from again: the other one fails, reads go back to it.
    moving.http_500 = True
    tx2 = rig.anvil.send()
    block2 = wait_included(rig.anvil, tx2)
    rec2 = rig.register(tx2)
    rig.mine_and_poll(3)
    done2 = rig.settlement(rec2.settlement_id)
    assert done2.verdict == Verdict.FINALITY_CONFIRMED
    assert done2.block_hash == rig.anvil.block(block2)["hash"]
    assert rig.multi.transport.active == 0
    assert rig.store.reorgs() == []


def test_all_frozen_alike_waits_without_switching(rig: MultiRig) -> None:
    tx = rig.anvil.send()
    rec = rig.register(tx)
    rig.watcher.poll()
    for proxy in rig.proxies:
        proxy.freeze_head()
    rig.anvil.mine(3)
    failovers = rig.multi.transport.failovers
    probes_before = rig.proxies[1].calls["eth_blockNumber"]
    _poll_for(rig, 4 * STALL_S)
    assert rig.settlement(rec.settlement_id).verdict == Verdict.AWAITING_FINALITY
    assert rig.multi.transport.active == 0
    assert rig.multi.transport.failovers == failovers
    assert rig.store.reorgs() == []
    assert [h.errors for h in rig.multi.health] == [0, 0]  # no error storm
    assert [h.state for h in rig.multi.health] == ["closed", "closed"]
    assert rig.proxies[1].calls["eth_blockNumber"] - probes_before <= 5
    for proxy in rig.proxies:
        proxy.clear()
    _poll_until(
        rig,
        lambda: rig.settlement(rec.settlement_id).verdict == Verdict.FINALITY_CONFIRMED,
        within_s=DEADLINE_S,
    )
    assert rig.store.reorgs() == []


def test_idle_chain_costs_at_most_one_probe_per_period(rig: MultiRig) -> None:
    other = rig.proxies[1]
    rig.watcher.poll()
    before = other.calls["eth_blockNumber"]
    started = time.monotonic()
    _poll_for(rig, 5 * STALL_S)  # no block mined: the head stays put, nobody is ahead
    elapsed = time.monotonic() - started
    probes = other.calls["eth_blockNumber"] - before
    assert 1 <= probes <= math.ceil(elapsed / STALL_S) + 1
    assert rig.multi.transport.active == 0
    assert rig.multi.transport.stalls == 0
    assert [h.state for h in rig.multi.health] == ["closed", "closed"]
    assert rig.store.reorgs() == []


def test_frozen_node_left_for_a_node_on_another_fork_is_a_reorg_not_a_receipt(
    start_anvil: Callable[..., Anvil], tmp_path: Path
) -> None:
    main = start_anvil()
    main.mine(2)
    rig = _short_stall(multi_rig(main, f"sqlite:///{tmp_path}/f.db", quorum=1))
    try:
        frozen, ahead = rig.proxies
        rig.watcher.poll()  # the window holds the fork point
        fork_point = main.head()
        tx = main.send()
        block = wait_included(main, tx)
        # The second endpoint now fronts a node that forked before our block and is ahead.
        fork = start_anvil("--fork-url", main.url, "--fork-block-number", str(fork_point))
        fork.mine(8)
        ahead.upstream = fork.url
        rec = rig.register(tx)
        rig.watcher.poll()
        frozen.freeze_head()
        main.mine(3)  # main's own blocks, hidden by the frozen proxy
        _poll_until(rig, lambda: rig.multi.transport.active == 1, within_s=DEADLINE_S)
        rig.watcher.poll()
        # The fork does not contain our block: the tracker reports the reorg, and the
        # settlement is not confirmed on main's block (quorum 1 follows the node it reads).
        [reorg] = rig.store.reorgs()
        assert reorg.ancestor_number == fork_point
        assert reorg.old_head_number >= block
        after = rig.settlement(rec.settlement_id)
        assert after.verdict != Verdict.FINALITY_CONFIRMED
        assert after.block_hash != main.block(block)["hash"]
        assert rig.view(rec.settlement_id)["receipt"] is None
        report = {h["endpoint"]: h for h in rig.multi.health_report()}
        assert report[frozen.url]["state"] == "stalled"
        assert report[ahead.url]["active"] is True
    finally:
        rig.close()


def test_stall_backoff_doubles_and_catching_up_closes() -> None:
    now = [100.0]
    health = EndpointHealth("http://a", base_backoff_s=1.0, clock=lambda: now[0])
    health.saw_head(10)
    now[0] += 7.0
    assert health.head_age_s() == 7.0
    assert health.frozen_for_s() == 0.0  # not asked since: no evidence of a stall
    health.saw_head(10)
    assert health.frozen_for_s() == 7.0
    health.stall("head 10 frozen for 7.0 s while http://b is at 14")
    assert (health.state, health.usable, health.stall_due) == ("stalled", False, False)
    now[0] += 1.0  # the first backoff passed: checked again, usable as a last resort
    assert health.usable and health.stall_due
    health.stall("head 10 while the best head known is 16")
    now[0] += 1.5
    assert not health.usable  # the second backoff is 2 s
    now[0] += 0.5
    assert health.usable
    health.unstall()
    assert (health.state, health.stalled, health.errors) == ("closed", None, 0)


def test_stall_period_follows_the_chain_block_time() -> None:
    assert pool.stall_period_of(1, 2.0) == 36.0  # mainnet: 12 s blocks, polled faster
    assert pool.stall_period_of(31337, 0.1) == MIN_STALL_S  # fast local chain: the floor
    assert pool.stall_period_of(999_999, 4.0) == 12.0  # unknown chain: its poll interval
