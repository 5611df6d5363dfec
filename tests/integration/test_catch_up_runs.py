"""A catch-up after downtime commits runs of quiet blocks together, with the same outcome
as a transaction per block: every header stored, and a settlement that reaches its depth
inside a run is decided at the block where it did (its evidence says depth N, not the
run's end), through the API view a user reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from chains.block_facts import header_from_compact
from tests.integration.helpers import random_tx_hash, wait_included
from tests.support.anvil import Anvil
from tests.support.rigs import CHAIN, FakeClock, make_watcher
from watcher.engine.pipeline import RUN_BLOCKS

pytestmark = pytest.mark.anvil


def test_a_settlement_final_inside_a_quiet_run_is_decided_at_its_depth(
    anvil: Anvil, tmp_path: Path
) -> None:
    rig = make_watcher(anvil, f"sqlite:///{tmp_path}/runs.db", max_blocks_per_poll=1000)
    try:
        rig.watcher.poll()
        tx = anvil.send()
        included = wait_included(anvil, tx)
        sid = rig.register(tx).settlement_id
        rig.watcher.poll()  # the inclusion is recorded; the run starts after it
        anvil.mine(RUN_BLOCKS + 50)  # more than one run, ending mid-run
        stats = rig.watcher.catch_up()
        head = anvil.head()
        assert stats.behind == 0 and rig.watcher.head is not None
        assert rig.watcher.head.number == head
        record = rig.store.chain(CHAIN)
        assert record is not None and record.head_number == head
        window = rig.config.resolved_header_window
        stored = [n for n, _, _, _ in rig.store.headers(CHAIN)]
        assert stored == list(range(head - min(window, head + 1) + 1, head + 1))
        view = rig.view(sid)
        assert (view["verdict"], view["block_number"]) == ("FINALITY_CONFIRMED", included)
        facts = rig.settlement(sid).decision["evidence"]["facts"]
        assert facts["confirmations"] == rig.config.resolved_confirmations
    finally:
        rig.store.close()


def test_settlements_due_at_different_depths_in_one_run_are_each_decided_at_their_own(
    anvil: Anvil, tmp_path: Path
) -> None:
    """Quiet blocks nothing is due at write their headers only: each settlement is still
    decided at the block that gives it its own depth, and every header is stored."""
    rig = make_watcher(anvil, f"sqlite:///{tmp_path}/depths.db", max_blocks_per_poll=1000)
    try:
        rig.watcher.poll()
        txs = [anvil.send(value=v) for v in (1, 2)]
        included = [wait_included(anvil, tx) for tx in txs]
        depths = {txs[0]: 7, txs[1]: 60}
        ids = {tx: rig.register(tx, confirmations=depths[tx]).settlement_id for tx in txs}
        rig.watcher.poll()  # the inclusions are recorded; the run starts after them
        anvil.mine(RUN_BLOCKS // 2)
        rig.watcher.catch_up()
        head = anvil.head()
        assert rig.watcher.head is not None and rig.watcher.head.number == head
        window = rig.config.resolved_header_window
        stored = [n for n, _, _, _ in rig.store.headers(CHAIN)]
        assert stored == list(range(head - min(window, head + 1) + 1, head + 1))
        for tx, block in zip(txs, included, strict=True):
            view = rig.view(ids[tx])
            assert (view["verdict"], view["block_number"]) == ("FINALITY_CONFIRMED", block)
            facts = rig.settlement(ids[tx]).decision["evidence"]["facts"]
            assert facts["confirmations"] == depths[tx]
    finally:
        rig.store.close()


def test_watched_blocks_inside_a_run_decide_each_settlement_at_its_own_depth(
    anvil: Anvil, tmp_path: Path
) -> None:
    """Txs included while the watcher was down, in blocks of one run with quiet stretches
    between them: what is due at a watched block is asked with the stretch after it, and
    carried through the stretch. Each settlement's decision names the head that gave it its
    own depth (inclusion + depth - 1), not a later block of the stretch or the run."""
    rig = make_watcher(anvil, f"sqlite:///{tmp_path}/watched.db", max_blocks_per_poll=1000)
    try:
        rig.watcher.poll()
        depths = [2, 9, 4, 30, 1]
        txs: list[str] = []
        included: list[int] = []
        for gap, value in zip((3, 1, 6, 2, 5), range(1, 6), strict=True):
            tx = anvil.send(value=value)
            txs.append(tx)
            included.append(wait_included(anvil, tx))
            anvil.mine(gap)
        anvil.mine(40)
        ids = [
            rig.register(tx, confirmations=d).settlement_id
            for tx, d in zip(txs, depths, strict=True)
        ]
        rig.watcher.catch_up()
        assert rig.watcher.head is not None and rig.watcher.head.number == anvil.head()
        for sid, block, depth in zip(ids, included, depths, strict=True):
            view = rig.view(sid)
            assert (view["verdict"], view["block_number"]) == ("FINALITY_CONFIRMED", block)
            facts = rig.settlement(sid).decision["evidence"]["facts"]
            assert facts["confirmations"] == depth
            assert facts["head_number"] == block + depth - 1
    finally:
        rig.store.close()


def test_every_header_the_window_keeps_after_a_catch_up_carries_its_compact_fields(
    anvil: Anvil, tmp_path: Path
) -> None:
    """A run of a poll makes compact headers only for the blocks the window keeps after the
    poll (the rows of an earlier run's window are replaced within the poll): after a
    catch-up of several polls, each ending mid-run, every stored header of the window still
    holds the fields of its hash, so a receipt reads its header chain from the store."""
    per_poll = RUN_BLOCKS + 30
    rig = make_watcher(anvil, f"sqlite:///{tmp_path}/compact.db", max_blocks_per_poll=per_poll)
    try:
        rig.watcher.poll()
        anvil.mine(2 * per_poll + 17)
        rig.watcher.catch_up()
        head = anvil.head()
        assert rig.watcher.head is not None and rig.watcher.head.number == head
        window = rig.config.resolved_header_window
        rows = rig.store.compact_headers(CHAIN, 0, head)
        assert [n for n, _, _, _ in rows] == list(range(head - window + 1, head + 1))
        for number, block_hash, _parent, compact in rows:
            assert compact is not None, number
            assert header_from_compact(compact)["hash"] == block_hash
    finally:
        rig.store.close()


def test_deadlines_passed_while_down_are_decided_in_the_catch_up_run(
    anvil: Anvil, tmp_path: Path
) -> None:
    """What is due in a run is asked through each reason's own index: a deadline passed
    while the watcher was down times its settlement out in the run, one whose late-finality
    watch ended meanwhile is no longer watched, and a tx included in the run is still
    confirmed at its depth."""
    clock = FakeClock()
    rig = make_watcher(
        anvil,
        f"sqlite:///{tmp_path}/deadlines.db",
        clock,
        max_blocks_per_poll=1000,
        late_watch_s=60,
    )
    try:
        rig.watcher.poll()
        late = rig.register(random_tx_hash(), timeout_s=10).settlement_id
        never = rig.register(random_tx_hash(), timeout_s=100).settlement_id
        clock.advance(11)
        rig.watcher.poll()  # no new block: the deadline alone times ``late`` out
        assert rig.view(late)["verdict"] == "TIMEOUT_TREATED_AS_FAILURE"
        assert rig.settlement(late).watching
        tx = anvil.send()
        included = wait_included(anvil, tx)
        sid = rig.register(tx).settlement_id
        anvil.mine(RUN_BLOCKS // 10)
        clock.advance(60 + 100)  # past ``never``'s deadline and ``late``'s late watch
        rig.watcher.catch_up()
        assert rig.watcher.head is not None and rig.watcher.head.number == anvil.head()
        assert rig.view(never)["verdict"] == "TIMEOUT_TREATED_AS_FAILURE"
        assert not rig.settlement(late).watching
        view = rig.view(sid)
        assert (view["verdict"], view["block_number"]) == ("FINALITY_CONFIRMED", included)
    finally:
        rig.store.close()
