"""Reorgs around a catch-up's shared transactions: blocks with watched txs are committed in
runs (watcher/engine/apply.py, ``apply_run``), and a reorg that replaces some of a run's
blocks, or lands between two runs of one catch-up, still moves each watched tx to the
block the node now holds it in, and each is decided at its own depth there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.helpers import wait_included
from tests.support.anvil import Anvil
from tests.support.rigs import CHAIN, Rig, make_watcher

pytestmark = pytest.mark.anvil

DEPTH = 12
"""Confirmations asked of every settlement here: none is final before the reorg."""


def spread_txs(rig: Rig, count: int, gap: int) -> list[str]:
    """``count`` txs, each in its own block followed by ``gap`` empty ones, registered
    once mined (the catch-up's look-up finds them above the processed head)."""
    txs = []
    for value in range(1, count + 1):
        tx = rig.anvil.send(value=value)
        wait_included(rig.anvil, tx)
        rig.anvil.mine(gap)
        txs.append(tx)
    return txs


def reorged(anvil: Anvil, depth: int, txs: list[str], offsets: list[int]) -> dict[str, int]:
    """Replace the last ``depth`` blocks, re-including ``txs`` at ``offsets`` of the new
    branch; returns each tx's new block."""
    raws = [anvil.raw_tx(tx) for tx in txs]
    anvil.reorg(depth, list(zip(raws, offsets, strict=True)))
    return {tx: wait_included(anvil, tx) for tx in txs}


def assert_confirmed_at(rig: Rig, ids: dict[str, str], blocks: dict[str, int]) -> None:
    """Each settlement confirmed at its tx's block, with the depth it asked for."""
    for tx, sid in ids.items():
        view = rig.view(sid)
        assert (view["verdict"], view["block_number"]) == ("FINALITY_CONFIRMED", blocks[tx])
        facts = rig.settlement(sid).decision["evidence"]["facts"]
        assert facts["confirmations"] == DEPTH


def test_a_reorg_of_a_runs_last_blocks_moves_the_watched_txs_it_replaced(
    anvil: Anvil, tmp_path: Path
) -> None:
    rig = make_watcher(anvil, f"sqlite:///{tmp_path}/after.db", max_blocks_per_poll=1000)
    try:
        rig.watcher.poll()
        txs = spread_txs(rig, 4, 3)
        ids = {tx: rig.register(tx, confirmations=DEPTH).settlement_id for tx in txs}
        blocks = {tx: wait_included(anvil, tx) for tx in txs}
        rig.watcher.catch_up()  # one poll: the 16 blocks (4 with a watched tx) in one run
        assert [rig.view(ids[tx])["block_number"] for tx in txs] == [blocks[tx] for tx in txs]
        # The last 8 blocks hold the last two txs: both re-included, two blocks later and
        # one block later.
        moved = reorged(anvil, 8, txs[2:], [2, 5])
        assert all(moved[tx] != blocks[tx] for tx in txs[2:])
        blocks.update(moved)
        rig.watcher.catch_up()
        head = anvil.head()
        assert rig.watcher.head is not None and rig.watcher.head.number == head
        for tx in txs:
            view = rig.view(ids[tx])
            assert (view["block_number"], view["reorg_count"]) == (blocks[tx], int(tx in moved))
            if tx in moved:  # its depth on the new branch is short of DEPTH
                assert view["verdict"] == "AWAITING_FINALITY"
        assert [r.depth for r in rig.store.reorgs(CHAIN)] == [8]
        rig.mine_and_poll(DEPTH)
        assert_confirmed_at(rig, ids, blocks)
    finally:
        rig.store.close()


def test_a_reorg_between_two_runs_of_a_catch_up_is_followed(anvil: Anvil, tmp_path: Path) -> None:
    """The first poll commits part of the gap as a run; the node then reorgs below that
    run's top, into blocks the watcher never fetched: the next polls undo the committed
    part and catch up on the new branch."""
    rig = make_watcher(anvil, f"sqlite:///{tmp_path}/between.db", max_blocks_per_poll=10)
    try:
        rig.watcher.poll()
        txs = spread_txs(rig, 5, 4)  # 25 blocks: a tx every fifth
        ids = {tx: rig.register(tx, confirmations=DEPTH).settlement_id for tx in txs}
        blocks = {tx: wait_included(anvil, tx) for tx in txs}
        stats = rig.watcher.poll()  # the first 10 blocks, two watched txs among them
        assert stats.blocks == 10 and stats.behind > 0
        assert rig.view(ids[txs[1]])["block_number"] == blocks[txs[1]]
        # From below the run's top (its second watched block) into blocks never fetched.
        moved = reorged(anvil, 21, txs[1:], [0, 6, 9, 14])
        blocks.update(moved)
        rig.mine_and_poll(DEPTH)
        assert [r.depth for r in rig.store.reorgs(CHAIN)] != []
        assert_confirmed_at(rig, ids, blocks)
        assert rig.view(ids[txs[1]])["reorg_count"] == 1
        window = rig.config.resolved_header_window
        head = anvil.head()
        stored = [n for n, _, _, _ in rig.store.headers(CHAIN)]
        assert stored == list(range(head - min(window, head + 1) + 1, head + 1))
    finally:
        rig.store.close()
