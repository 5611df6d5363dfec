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

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from watcher.engine.matching import BlockMatches
from watcher.engine.observe import ChainPosition
from watcher.engine.payments import payment_writes
from watcher.engine.reorgs import ReorgOutcome, undo_reorg
from watcher.engine.rules import ChainRules, Tally
from watcher.engine.settle import Rules, decide_settlement
from watcher.engine.values import BlockInput, BlockOutcome
from watcher.store.block_txn import BlockTxn, put_headers
from watcher.store.records import SettlementRecord


def apply_block(
    txn: BlockTxn,
    inp: BlockInput,
    rules: ChainRules,
    *,
    progress: bool = True,
    due: Sequence[SettlementRecord] | Callable[[], Sequence[SettlementRecord]] | None = None,
) -> BlockOutcome:
    """Everything ``inp`` changes, written in ``txn`` (see the module doc). ``progress``:
    False when the caller knows no provisional settlement was in progress before the block
    (:func:`apply_run`): the provisional updates are then looked for only if the block
    included a provisional settlement. ``due``: what is due at the block, when the caller
    read it in this transaction already, or how to read it after the block's inclusions
    are written (:func:`apply_run`; a block with no reorg)."""
    tally = Tally()
    undone: ReorgOutcome | None = None
    if inp.reorg is not None:
        new_head = inp.node_head or inp.head
        undone = undo_reorg(txn, inp.reorg, new_head, rules.chain, rules.plan)
    if inp.new_head:
        _write_header(txn, inp, rules)
    anchored = _write_matches(txn, inp)
    if inp.store_finalized is not None:
        txn.set_finalized(inp.store_finalized)
    decided = _decide_due(txn, inp, rules, undone, tally, due)
    watched = inp.transfers_watched or inp.reorg is not None
    paid = payment_writes(txn, inp, rules, tally) if watched else []
    head = inp.head
    if inp.block is not None and (progress or any(_provisional(r) for r in anchored)):
        progressed = {s for s, _ in inp.matches.matched}
        rules.plan.on_progress(txn, head.number, head.hash, progressed)
    touched = undone.touched if undone is not None else frozenset()
    changed = txn.by_ids(list(inp.matches.ids | decided | touched))
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


def apply_run(txn: BlockTxn, run: Sequence[BlockInput], rules: ChainRules) -> list[BlockOutcome]:
    """Consecutive blocks (no reorg among them, no transfer watched, no quorum gate: a
    catch-up) in order in one transaction, with the outcomes :func:`apply_block` gives each
    alone, committed one by one.

    Every block's header is written at the end, all in one insert
    (:func:`~watcher.store.block_txn.put_headers`: nothing in the transaction reads them).
    A block with a watched tx (or a replacing one) is applied whole, as memory would have
    matched it had the blocks before it committed first (:func:`_as_memory_would`).
    Between two such blocks, a block decides what is due at it. What is due only grows
    with the height there (depth reached; the ``finalized`` height and the time are the
    run's), so the store is asked what is due at the stretch's last block: a block before
    the first one something is due at needs nothing but its header, and the block where
    something is due is applied whole (decided *at that block*), then the rest is asked
    about again, unless every settlement decided there stopped being watched: then what is
    due at the stretch's last block is the rest of the answer (a settlement not watched is
    never due; nothing else was written). With provisional updates to send, every block is
    applied whole."""
    if len(run) < 2 or any(inp.block is None or inp.reorg for inp in run):
        return [apply_block(txn, inp, rules) for inp in run]  # a poll's one new block
    last = run[-1]
    whole = any(inp.covered != last.covered or inp.transfers_watched for inp in run) or bool(
        txn.provisional_in_progress()
    )
    outcomes: list[BlockOutcome] = []
    watching: dict[str, bool] = {}
    anchored: set[str] = set()
    late_ms = rules.late_watch_ms
    rest: list[SettlementRecord] | None = None  # due at the stretch's end by depth, known
    i = 0
    while i < len(run):
        full, due = (i, None)
        if not whole:
            full, due = _first_due(txn, run, i, _next_matched(run, i), late_ms, rest)
        rest = None
        outcomes += [_header_outcome(inp) for inp in run[i:full]]
        if full < len(run):
            inp = _as_memory_would(run[full], watching, anchored)
            alone = replace(inp, new_head=False, store_finalized=None)  # written with the run's
            asked: list[_StretchDue] = []
            given: Sequence[SettlementRecord] | Callable[[], Sequence[SettlementRecord]] | None
            given = None if due is None else due.at_block
            end = _next_matched(run, full + 1) - 1
            if due is None and not whole and end > full:
                # A watched block: what is due at it, asked with the stretch after it.
                given = functools.partial(_due_with_stretch, txn, run, full, end, late_ms, asked)
            outcome = apply_block(txn, alone, rules, progress=whole, due=given)
            outcomes.append(replace(outcome, stored_finalized=inp.store_finalized))
            anchored |= {sid for sid, _ in inp.matches.matched + inp.matches.replacing}
            watching.update((r.settlement_id, r.watching) for r in outcome.changed)
            whole = whole or any(_provisional(r) for r in outcome.changed)
            told = due if due is not None else (asked[0] if asked else None)
            if told is not None:
                rest = told.rest_after(outcome.changed)
        i = full + 1
    _headers_only(txn, run, rules)
    return outcomes


def _next_matched(run: Sequence[BlockInput], i: int) -> int:
    """The index of the first block from ``run[i]`` on holding a watched (or replacing) tx
    (``len(run)``: none)."""
    for j in range(i, len(run)):
        if run[j].matches.matched or run[j].matches.replacing:
            return j
    return len(run)


def _as_memory_would(
    inp: BlockInput, watching: Mapping[str, bool], anchored: set[str]
) -> BlockInput:
    """``inp`` (matched with memory from before the run) as memory would have matched it
    had the run's earlier blocks committed one by one: a settlement whose watch they ended
    is not matched, and one they anchored (its tx included, or replaced) is not replaced by
    sender and nonce: its index entry would carry its own tx's sender and nonce, which that
    tx used up."""
    matches = inp.matches
    if not (matches.matched or matches.replacing) or not (watching or anchored):
        return inp
    kept = BlockMatches(
        [(sid, tx) for sid, tx in matches.matched if watching.get(sid, True)],
        [
            (sid, tx)
            for sid, tx in matches.replacing
            if watching.get(sid, True) and sid not in anchored
        ],
    )
    return replace(inp, matches=kept)


@dataclass(frozen=True)
class _StretchDue:
    """What is due at a stretch's block (:func:`_first_due`), and the rest of what is due
    at the stretch's last block: due there by depth alone, later than this block."""

    at_block: list[SettlementRecord]
    later: list[SettlementRecord]

    def rest_after(self, changed: Sequence[SettlementRecord]) -> list[SettlementRecord] | None:
        """What is due at the stretch's last block once :attr:`at_block` was decided (as
        ``changed`` reads them back): :attr:`later`, when each decided one stopped being
        watched (the due query's first condition); None: ask the store again."""
        decided = {r.settlement_id for r in self.at_block}
        if any(r.watching for r in changed if r.settlement_id in decided):
            return None
        return self.later


def _due_with_stretch(
    txn: BlockTxn,
    run: Sequence[BlockInput],
    at: int,
    end: int,
    late_ms: int,
    asked: list[_StretchDue],
) -> list[SettlementRecord]:
    """What is due at ``run[at]`` (a block with a watched tx, its inclusions written), read
    in one query with what is due at ``run[end]``, the end of the stretch after it (kept in
    ``asked``: :meth:`_StretchDue.rest_after` carries it into that stretch)."""
    span = txn.due_span(run[at].head.number, run[end].head.number, run[end].covered, late_ms)
    told = _StretchDue([r for r, now in span if now], [r for r, now in span if not now])
    asked.append(told)
    return told.at_block


def _first_due(
    txn: BlockTxn,
    run: Sequence[BlockInput],
    i: int,
    stop: int,
    late_ms: int,
    known: list[SettlementRecord] | None = None,
) -> tuple[int, _StretchDue | None]:
    """The index of the first block of ``run[i:stop]`` at which a settlement is due
    (``stop``: none), and what is due there (None: not asked; ``run[i]`` holds a watched
    tx, its block writes before it decides). One query (:meth:`~watcher.store.block_txn.
    BlockTxn.due_span`): what is due at the stretch's last block, each marked whether due at
    ``run[i]`` already; one that is not is due by depth alone, from its ``confirm_height``
    on. ``known``: instead of the query, what is due at the stretch's last block, each by
    depth alone (the rest of the stretch's answer, :meth:`_StretchDue.rest_after`). Nothing
    is written between the answer and that block's decisions (the blocks before it in the
    stretch write only headers, at the run's end), so what is due there is the answer's
    part, exactly as asking again would give it. The run's blocks share the ``covered``
    height (else :func:`apply_run` applies every block whole)."""
    if stop == i:
        return i, None
    first, last = run[i].head.number, run[stop - 1].head.number
    if known is None:
        span = txn.due_span(first, last, run[stop - 1].covered, late_ms)
    else:
        span = [(r, r.confirm_height is not None and r.confirm_height <= first) for r in known]
    if not span:
        return stop, None
    full = i
    if not any(at_first for _, at_first in span):
        heights = [r.confirm_height for r, _ in span if r.confirm_height is not None]
        at = max(first, min(heights, default=first))
        full = i + min(at - first, stop - 1 - i)
    height = run[full].head.number
    now: list[SettlementRecord] = []
    later: list[SettlementRecord] = []
    for r, at_first in span:
        due_now = at_first or (r.confirm_height is not None and r.confirm_height <= height)
        (now if due_now else later).append(r)
    return full, _StretchDue(now, later)


def _headers_only(txn: BlockTxn, run: Sequence[BlockInput], rules: ChainRules) -> None:
    """The headers (and the stored ``finalized``) of blocks nothing is due at."""
    if not run:
        return
    keep = rules.config.resolved_header_window
    put_headers(
        txn,
        [
            (i.head.number, i.head.hash, i.head.parent_hash, i.head.timestamp, i.compact_header)
            for i in run
        ],
        keep,
    )
    finalized = [i.store_finalized for i in run if i.store_finalized is not None]
    if finalized:
        txn.set_finalized(finalized[-1])


def _header_outcome(inp: BlockInput) -> BlockOutcome:
    """What :func:`apply_block` returns for a quiet block nothing is due at."""
    return BlockOutcome(
        decisions=0,
        tags=inp.tags,
        approval=inp.approval,
        stored_finalized=inp.store_finalized,
        pushed=inp.head,
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


def _write_header(txn: BlockTxn, inp: BlockInput, rules: ChainRules) -> None:
    """The head's header and pointer."""
    head = inp.head
    keep = rules.config.resolved_header_window
    txn.put_header(
        head.number, head.hash, head.parent_hash, head.timestamp, keep, inp.compact_header
    )


def _write_matches(txn: BlockTxn, inp: BlockInput) -> list[SettlementRecord]:
    """The block's inclusions and replacements; returns the records they were written
    over (as read before)."""
    if inp.block is None:
        return []
    head = inp.head
    matches = inp.matches
    read = txn.by_ids(list(matches.ids))
    by_id = {r.settlement_id: r for r in read}
    for sid, tx in matches.matched:
        r = inp.receipts[tx.hash]
        txn.set_inclusion(
            by_id[sid],
            r.block_number,
            r.block_hash,
            r.tx_index,
            r.status,
            tx.sender,
            tx.nonce,
            scanned=True,
        )
    for sid, tx in matches.replacing:
        txn.set_replacement(by_id[sid], tx.hash, head.number, head.hash)
    return read


def _provisional(rec: SettlementRecord) -> bool:
    """Whether ``rec`` may get provisional updates (their query says when it does)."""
    return rec.provisional and rec.commit_url is not None


def _decide_due(
    txn: BlockTxn,
    inp: BlockInput,
    rules: ChainRules,
    undone: ReorgOutcome | None,
    tally: Tally,
    known: Sequence[SettlementRecord] | Callable[[], Sequence[SettlementRecord]] | None = None,
) -> set[str]:
    """Decide every settlement due at the head (``known``: already read in this
    transaction), and those a reorg reversed. Returns the ids decided."""
    head = inp.head
    if known is None:
        known = txn.due(head.number, inp.covered, rules.late_watch_ms)
    elif callable(known):
        known = known()
    due: dict[str, SettlementRecord] = {r.settlement_id: r for r in known}
    reversed_ids = undone.reversed if undone is not None else frozenset()
    for r in txn.by_ids([i for i in reversed_ids if i not in due]):
        due[r.settlement_id] = r
    reversal = undone.reversal if undone is not None else None
    deciding = rules.deciding(inp.approval, reversal)
    decide_records(txn, due.values(), inp.position, inp.now, deciding, tally, reversed_ids)
    return set(due)
