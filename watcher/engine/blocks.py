"""One block's effects, in one store transaction.

For each new block (or a reorg seen without one), the engine: matches the block's txs
against the watch index (``matching``, pure), fetches receipts only when a watched tx is
in it, asks the finality gate before the transaction (it may call other endpoints), then
writes in **one** transaction: the reorg's undoing (``reorgs``), the header and head
pointer, inclusions and replacements, every decision now due, and their outbox rows. Only
after the commit does memory (window, index) move to match the store.
"""

from __future__ import annotations

from typing import Any

from chains.block_checks import check_senders, checked_receipts
from chains.errors import ChainError
from chains.models import Block, BlockHeader
from chains.quorum import GateResult
from chains.tracker import Reorg
from watcher.engine.matching import NO_REANCHOR, BlockMatches, match_block, reanchor_of
from watcher.engine.observe import ChainPosition
from watcher.engine.payments import PaymentCommits
from watcher.engine.reorgs import ReorgOutcome, undo_reorg
from watcher.engine.settle import decide_settlement
from watcher.store.block_txn import BlockTxn
from watcher.store.records import SettlementRecord


class ChainInconsistentReceipts(ChainError):
    """A block lists a watched tx but the node returned no receipt for it: retry the block."""

    def __init__(self, chain: str, number: int, missing: list[str]) -> None:
        super().__init__(
            f"{chain}: block {number} lists {len(missing)} watched tx(s) without receipts "
            f"(first {missing[0]}); treating them as not yet included and retrying"
        )


class BlockCommits(PaymentCommits):
    """The per-block part of a chain's engine."""

    _stored_finalized: int | None = None

    def _commit_block(
        self,
        block: Block | None,
        reorg: Reorg | None,
        finalized: int | None,
        node_head: BlockHeader | None = None,
    ) -> int:
        """Everything one block changes, in one store transaction. Returns decisions made.

        ``node_head`` is the node's ``latest`` in this poll: a reorg is recorded with it as
        the new branch's head (the block committed first is only the branch's bottom)."""
        now = self.clock()
        self._confirmed_blocks = []
        matches = self._matches(block, reorg)
        receipts = self._receipts(block, matches)
        paying = self._payment_candidates(block, reorg)  # watcher/engine/payments.py
        head = block.header if block is not None else (reorg.common_ancestor if reorg else None)
        assert head is not None
        pos = ChainPosition(
            head.number, head.hash, finalized, self.untrusted_finalized, self.safe_number
        )
        self._approval = self._ask_gate(head, self._covered(finalized))
        with self.store.block_txn(self.name, now, self.fence) as txn:
            outcome = None
            if reorg is not None:
                outcome = undo_reorg(txn, reorg, node_head or head, self.name, self.plan)
            self._write_block(txn, block, head, matches, receipts)
            if finalized is not None and finalized != self._stored_finalized:
                txn.set_finalized(finalized)
            due, decisions = self._decide_due(txn, head, finalized, pos, now, outcome)
            paid, paid_decisions = self._payment_writes(txn, block, reorg, paying, pos, now)
            decisions += paid_decisions
            if block is not None:
                self.plan.on_progress(txn, head.number, head.hash, {s for s, _ in matches.matched})
            touched = outcome.touched if outcome is not None else frozenset()
            changed = txn.by_ids(list(matches.ids | due | touched))
        # The transaction committed: now move memory to match the store.
        self._stored_finalized = finalized
        if reorg is not None:
            self.window.rewind_to(reorg.common_ancestor.number)
        if block is not None:
            self.window.push(block.header)
        for rec in changed:
            self.index.update(rec)
        self._follow_payments(paid)
        self._observe_confirmed(now)
        return decisions

    def _matches(self, block: Block | None, reorg: Reorg | None) -> BlockMatches:
        """The block's watched txs and replacements; after a reorg, also of settlements
        anchored on the replaced blocks (read before the transaction)."""
        if block is None:
            return BlockMatches([], [])
        reanchor = NO_REANCHOR
        if reorg is not None:
            anchored = self.store.anchored_above(self.name, reorg.common_ancestor.number)
            reanchor = reanchor_of(anchored, self.index)
        return match_block(block.txs, self.index, reanchor)

    def _receipts(self, block: Block | None, matches: BlockMatches) -> dict[str, Any]:
        """Receipts of the block's watched txs, checked against its roots (none fetched
        when it holds none; a block with only a replacing tx is checked the same way: the
        replacement is decided on its txs)."""
        if block is None or not (matches.matched or matches.replacing):
            return {}
        # Several settlements of one tx (one per caller) share its receipt: asked once.
        wanted: list[str] = list(dict.fromkeys(tx.hash for _, tx in matches.matched))
        checked = checked_receipts(
            self.client,
            self.facts,
            block.header.hash,
            wanted or [tx.hash for _, tx in matches.replacing],
        )
        found: dict[str, Any] = {r.tx_hash: r for r in checked}
        # Who sent them is what inclusions and replacements are matched on: checked too.
        said = {tx.hash: (tx.hash, tx.sender, tx.nonce) for _, tx in matches.matched}
        said.update((tx.hash, (tx.hash, tx.sender, tx.nonce)) for _, tx in matches.replacing)
        check_senders(self.client, self.facts, block.header.hash, list(said.values()))
        missing = [h for h in wanted if h not in found]
        if missing:
            raise ChainInconsistentReceipts(self.name, block.header.number, missing)
        return found

    def _write_block(
        self,
        txn: BlockTxn,
        block: Block | None,
        head: BlockHeader,
        matches: BlockMatches,
        receipts: dict[str, Any],
    ) -> None:
        """The head's header and pointer; the block's inclusions and replacements."""
        txn.put_header(
            head.number,
            head.hash,
            head.parent_hash,
            head.timestamp,
            self.config.resolved_header_window,
            self.facts.header(head.hash),
        )
        if block is None:
            return
        by_id = {r.settlement_id: r for r in txn.by_ids(list(matches.ids))}
        for sid, tx in matches.matched:
            r = receipts[tx.hash]
            txn.set_inclusion(
                by_id[sid], r.block_number, r.block_hash, r.tx_index, r.status, tx.sender, tx.nonce
            )
        for sid, tx in matches.replacing:
            txn.set_replacement(by_id[sid], tx.hash, head.number, head.hash)

    def _decide_due(
        self,
        txn: BlockTxn,
        head: BlockHeader,
        finalized: int | None,
        pos: ChainPosition,
        now: int,
        outcome: ReorgOutcome | None,
    ) -> tuple[set[str], int]:
        """Decide every settlement due at ``head``, and those a reorg reversed. Returns the
        ids decided and how many changed."""
        late_ms = int(self.config.late_watch_s * 1000)
        due: dict[str, SettlementRecord] = {
            r.settlement_id: r for r in txn.due(head.number, self._covered(finalized), late_ms)
        }
        reversed_ids = outcome.reversed if outcome is not None else frozenset()
        for r in txn.by_ids([i for i in reversed_ids if i not in due]):
            due[r.settlement_id] = r
        rules = self._rules(reversal=outcome.reversal if outcome is not None else None)
        decisions = 0
        for rec in due.values():
            reversed_ = rec.settlement_id in reversed_ids
            decisions += self._count(decide_settlement(txn, rec, pos, now, rules, reversed_))
        return set(due), decisions

    def _ask_gate(self, head: BlockHeader, finalized: int | None) -> GateResult | None:
        """Ask the finality gate about the settlements this head could make terminal
        (before the transaction: the gate may call other endpoints). None when trivial."""
        if self.gate.trivial:
            return None
        anchors = self.store.finality_anchors(self.name, head.number, finalized)
        if self.watching_transfers:  # the blocks of counted transfers (engine/payments.py)
            anchors += self.store.payment_anchors(self.name)
        return self.gate.approve(anchors, head) if anchors else GateResult(frozenset())
