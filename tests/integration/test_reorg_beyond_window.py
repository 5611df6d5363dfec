"""Reorgs that replace every block the watcher holds, on a real anvil (an acceptance
test found the watcher stuck after one).

Right after a cold start the header window holds one block: the tip, the block most likely
to be replaced. A reorg of it used to stop the chain for good ("no common ancestor"); now the
watcher rebases on the new chain, records the reorg, looks its watched txs up again, and goes
on. A reorg that reaches below the window and reverses a recorded settlement is a finality
violation, found without fetching any history at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import wait_included
from tests.integration.quorum_helpers import multi_rig
from tests.support.anvil import Anvil
from tests.support.rigs import CHAIN, Rig, RigFactory

pytestmark = pytest.mark.anvil

AWAITING = "AWAITING_FINALITY"
CONFIRMED = "FINALITY_CONFIRMED"


@pytest.fixture
def quiet_anvil(start_anvil: Callable[..., Anvil]) -> Anvil:
    """A node with 20 blocks of history that mines only when told to."""
    node = start_anvil("--no-mining")
    node.mine(20)
    assert node.head() == 20
    return node


def cold_started(make_rig: RigFactory, anvil: Anvil, **overrides: Any) -> Rig:
    rig = make_rig(anvil, poll=True, **overrides)
    assert rig.watcher.head is not None and rig.watcher.head.number == 20
    assert len(rig.watcher.window) == 1  # a cold start holds the tip only
    return rig


@pytest.mark.parametrize("restart", [False, True], ids=["cold-start", "after-restart"])
@pytest.mark.parametrize("depth", [1, 2, 5])
def test_reorg_replacing_the_start_block_is_followed(
    quiet_anvil: Anvil, make_rig: RigFactory, depth: int, restart: bool
) -> None:
    anvil = quiet_anvil
    rig = cold_started(make_rig, anvil)
    old = {n: anvil.block(n)["hash"] for n in range(21)}
    start_hash = old[20]
    tx = anvil.send()  # pending: the node does not mine
    raw = anvil.raw_tx(tx)
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()  # sees it pending: sender and nonce recorded
    assert rig.view(sid)["verdict"] == AWAITING
    if restart:
        rig.restart()

    anvil.reorg(depth, [(raw, depth - 1)])  # the tx re-included in the new tip
    assert anvil.block(20)["hash"] != start_hash
    included = wait_included(anvil, tx)
    assert included == 20
    anvil.mine(2)
    stats = rig.watcher.catch_up()

    assert rig.watcher.last_error is None
    assert stats.behind == 0
    assert rig.watcher.head is not None and rig.watcher.head.number == anvil.head() == 22
    [reorg] = rig.store.reorgs(CHAIN)
    assert (reorg.old_head_number, reorg.old_head_hash) == (20, start_hash)
    # What is known: block 20 and, from its parentHash, block 19. One replaced block: 19 is
    # known to match, the true ancestor. More: 19 is known replaced too, and the ancestor
    # recorded is a block on both branches (none is known below: genesis), never the new 19.
    assert reorg.depth == 1 if depth == 1 else reorg.depth >= 2
    assert reorg.ancestor_number == 19 if depth == 1 else reorg.ancestor_number <= 20 - depth
    assert reorg.ancestor_hash == old[reorg.ancestor_number]
    assert reorg.ancestor_hash == anvil.block(reorg.ancestor_number)["hash"]
    assert (reorg.new_head_number, reorg.new_head_hash) == (22, anvil.block(22)["hash"])
    assert reorg.finality_violation is False
    [event] = rig.events(kind="reorg")
    assert event.payload["beyond_window"] is True
    view = rig.view(sid)
    assert (view["verdict"], view["block_number"], view["confirmations"]) == (CONFIRMED, 20, 3)
    assert view["block_hash"] == anvil.block(20)["hash"]


def test_tx_reincluded_below_the_window_is_found_by_looking_it_up(
    quiet_anvil: Anvil, make_rig: RigFactory
) -> None:
    """The new branch below the window is never scanned: the rebase looks watched txs up."""
    anvil = quiet_anvil
    rig = cold_started(make_rig, anvil)
    tx = anvil.send()
    raw = anvil.raw_tx(tx)
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()
    anvil.reorg(5, [(raw, 0)])  # re-included at 16, below the window (which held 20)
    assert wait_included(anvil, tx) == 16
    rig.watcher.catch_up()

    assert rig.watcher.last_error is None
    view = rig.view(sid)
    assert (view["verdict"], view["block_number"]) == (CONFIRMED, 16)
    assert view["block_hash"] == anvil.block(16)["hash"]
    assert view["confirmations"] == 5


def test_reorg_deeper_than_the_window_reversing_a_confirmed_settlement_is_a_violation(
    quiet_anvil: Anvil, make_rig: RigFactory
) -> None:
    anvil = quiet_anvil
    rig = cold_started(make_rig, anvil, confirmations=2, header_window=4)
    tx = anvil.send()
    sid = rig.register(tx).settlement_id
    anvil.mine(1)
    rig.watcher.catch_up()
    assert rig.view(sid)["block_number"] == 21
    rig.mine_and_poll(8)  # head 29: the window holds 26..29, tx's block 21 is below it
    assert rig.view(sid)["verdict"] == CONFIRMED
    assert [n for n, *_ in rig.store.headers(CHAIN)] == [26, 27, 28, 29]
    old_21 = anvil.block(21)["hash"]

    anvil.reorg(10)  # replaces 20..29: the tx is erased, its block 21 gone
    anvil.mine(1)
    rig.watcher.catch_up()

    assert rig.watcher.last_error is None
    [reorg] = rig.store.reorgs(CHAIN)
    assert reorg.finality_violation is True
    assert reorg.touched == [sid]
    assert reorg.depth >= 29 - 21 + 1
    assert (21, old_21) in [(r["number"], r["old_hash"]) for r in reorg.replaced]
    assert rig.events(sid, "finality_violation") != []
    view = rig.view(sid)
    assert (view["verdict"], view["block_number"]) == (AWAITING, None)
    assert rig.watcher.head is not None and rig.watcher.head.number == 30


def test_an_endpoint_whose_chain_cannot_be_joined_is_left_for_the_ones_that_agree(
    start_anvil: Callable[..., Anvil], tmp_path: Path
) -> None:
    """Three endpoints, quorum 2: a competing chain (forked below the window, ahead, listed
    first) and two on ours. Following the first is never a stuck loop nor a rebase onto it."""
    main = start_anvil()
    main.mine(2)
    competing = start_anvil("--fork-url", main.url, "--fork-block-number", "2")
    competing.mine(12)  # its own blocks 3..14: ahead of ours, sharing nothing in our window
    tx = main.send()
    assert wait_included(main, tx) == 3
    rig = multi_rig(main, f"sqlite:///{tmp_path}/q.db", [competing.url, main.url, main.url])
    try:
        first = rig.proxies[0]
        first.http_500 = True  # down at start: the watcher starts on our chain
        rig.watcher.poll()
        assert rig.watcher.head is not None and rig.watcher.head.hash == main.block(3)["hash"]
        sid = rig.register(tx).settlement_id
        rig.watcher.poll()
        first.clear()
        rig.multi.transport.members[0].health.open_until = 0.0  # its circuit's backoff passed
        rig.transport_prefer_first()  # as after the others failed: reads go to it first

        main.mine(2)
        rig.watcher.poll()

        assert rig.watcher.last_error is None
        assert rig.store.reorgs(CHAIN) == []
        health = rig.multi.health_report()
        assert health[0]["state"] == "forked"
        assert "does not join ours" in str(health[0]["forked"])
        assert rig.multi.transport.active != 0
        view = rig.view(sid)
        assert (view["verdict"], view["block_hash"]) == (CONFIRMED, main.block(3)["hash"])
        assert rig.watcher.head.hash == main.block(5)["hash"]
        rig.mine_and_poll(2)
        assert rig.store.reorgs(CHAIN) == [] and rig.watcher.last_error is None
    finally:
        rig.close()
