"""One block's effects, inside the block's store transaction: :func:`apply_block`.

Given a :class:`~watcher.engine.values.BlockInput` (everything fetched before the
transaction), it writes in order: the reorg's undoing (``reorgs``), the header and head
pointer, inclusions and replacements, the ``finalized`` height, every decision now due
(and those a reorg reversed), the payments and deposits (``payments``), the caller's
progress rows; and returns a :class:`~watcher.engine.values.BlockOutcome`. It makes no
network call and touches no memory: the caller moves memory after the commit.

A deadline (time passed, no block) is the same call with an input that carries no block,
no reorg and no new head; a probe's inclusions decide through :func:`decide_records`.
"""

from __future__ import annotations

from collections.abc import Iterable

from watcher.engine.observe import ChainPosition
from watcher.engine.payments import payment_writes
from watcher.engine.reorgs import ReorgOutcome, undo_reorg
from watcher.engine.rules import ChainRules, Tally
from watcher.engine.settle import Rules, decide_settlement
from watcher.engine.values import BlockInput, BlockOutcome
from watcher.store.block_txn import BlockTxn
from watcher.store.records import SettlementRecord


def apply_block(txn: BlockTxn, inp: BlockInput, rules: ChainRules) -> BlockOutcome:
    """Everything ``inp`` changes, written in ``txn`` (see the module doc)."""
    tally = Tally()
    undone: ReorgOutcome | None = None
    if inp.reorg is not None:
        new_head = inp.node_head or inp.head
        undone = undo_reorg(txn, inp.reorg, new_head, rules.chain, rules.plan)
    if inp.new_head:
        _write_block(txn, inp, rules)
    if inp.store_finalized is not None:
        txn.set_finalized(inp.store_finalized)
    due = _decide_due(txn, inp, rules, undone, tally)
    paid = payment_writes(txn, inp, rules, tally)
    head = inp.head
    if inp.block is not None:
        progressed = {s for s, _ in inp.matches.matched}
        rules.plan.on_progress(txn, head.number, head.hash, progressed)
    touched = undone.touched if undone is not None else frozenset()
    changed = txn.by_ids(list(inp.matches.ids | due | touched))
    return BlockOutcome(
        decisions=tally.decisions,
        changed=tuple(changed),
        paid=tuple(paid),
        confirmed_blocks=tuple(tally.confirmed),
        tags=inp.tags,
        approval=inp.approval,
        stored_finalized=inp.store_finalized,
        rewind_to=inp.reorg.common_ancestor.number if inp.reorg is not None else None,
        pushed=inp.block.header if inp.block is not None else None,
    )


def decide_records(
    txn: BlockTxn,
    records: Iterable[SettlementRecord],
    pos: ChainPosition,
    now: int,
    rules: Rules,
    tally: Tally,
    reversed_ids: frozenset[str] = frozenset(),
) -> None:
    """Decide each of ``records`` at ``pos`` and store what changed (``reversed_ids``:
    those a reorg took the confirmed ground of)."""
    for rec in records:
        reversed_ = rec.settlement_id in reversed_ids
        tally.count(decide_settlement(txn, rec, pos, now, rules, reversed_))


def _write_block(txn: BlockTxn, inp: BlockInput, rules: ChainRules) -> None:
    """The head's header and pointer; the block's inclusions and replacements."""
    head = inp.head
    keep = rules.config.resolved_header_window
    txn.put_header(
        head.number, head.hash, head.parent_hash, head.timestamp, keep, inp.compact_header
    )
    if inp.block is None:
        return
    matches = inp.matches
    by_id = {r.settlement_id: r for r in txn.by_ids(list(matches.ids))}
    for sid, tx in matches.matched:
        r = inp.receipts[tx.hash]
        txn.set_inclusion(
            by_id[sid], r.block_number, r.block_hash, r.tx_index, r.status, tx.sender, tx.nonce
        )
    for sid, tx in matches.replacing:
        txn.set_replacement(by_id[sid], tx.hash, head.number, head.hash)


def _decide_due(
    txn: BlockTxn,
    inp: BlockInput,
    rules: ChainRules,
    undone: ReorgOutcome | None,
    tally: Tally,
) -> set[str]:
    """Decide every settlement due at the head, and those a reorg reversed. Returns the
    ids decided."""
    head = inp.head
    due: dict[str, SettlementRecord] = {
        r.settlement_id: r for r in txn.due(head.number, inp.covered, rules.late_watch_ms)
    }
    reversed_ids = undone.reversed if undone is not None else frozenset()
    for r in txn.by_ids([i for i in reversed_ids if i not in due]):
        due[r.settlement_id] = r
    reversal = undone.reversal if undone is not None else None
    deciding = rules.deciding(inp.approval, reversal)
    decide_records(txn, due.values(), inp.position, inp.now, deciding, tally, reversed_ids)
    return set(due)
