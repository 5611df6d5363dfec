"""The payment part of a chain's engine: counting transfers to watched addresses.

Per poll, and only while a token payment is watched, :meth:`PaymentCommits._prefetch_logs`
asks for the ``Transfer`` logs of every watched (token, recipient) pair over the poll's new
blocks in **one** ``eth_getLogs`` (:mod:`chains.logs`); a log is kept only if it belongs to
the block hash we process at its height (a log of another branch means the node moved:
the poll is retried, nothing was committed). Native transfers come from the full blocks the
tracker already fetched; their receipts (status) are fetched only for a block that holds a
value transfer to a watched recipient.

Inside each block's transaction (:meth:`PaymentCommits._payment_writes`): a reorg deletes
the transfers counted above its common ancestor (a confirmed payment that loses one is
re-decided under the reorg's reversal: a finality violation); the block's transfers are
given to the payments they pay; every payment that may have changed is decided
(:mod:`watcher.engine.payments_settle`).

Several payments watching the same recipient and asset share its transfers in registration
order: a transfer goes, whole, to the oldest that is not fully paid by the transfers counted
so far, or to the oldest of all when every one is.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace

from chains.block_checks import checked_receipts
from chains.errors import ChainInconsistent, RpcErrorResponse
from chains.logs import TransferLog, transfer_logs
from chains.models import Block
from chains.tracker import Reorg
from guard.payment import PAYMENT_KIND
from guard.settlement import Evidence, Reversal, Verdict
from guard.types import UnixMillis
from watcher.engine.decisions import record_event
from watcher.engine.deposits_apply import deposit_payload, deposit_writes
from watcher.engine.deposits_index import SubscriptionIndex
from watcher.engine.deposits_scan import DepositCandidate, deposit_candidates, native_deposit_txs
from watcher.engine.observe import ChainPosition
from watcher.engine.payments_index import PaymentIndex
from watcher.engine.payments_scan import Candidate, Lookup, candidates, native_txs
from watcher.engine.payments_settle import decide_payment_settlements
from watcher.engine.state import ChainState
from watcher.store.block_txn import BlockTxn
from watcher.store.deposits_store import deposits_in
from watcher.store.payment_records import NewTransfer, PaymentWatch, TransferRecord
from watcher.store.payments_store import (
    add_transfers,
    drop_transfers_above,
    drop_transfers_in,
    payments_due,
    specs_in,
    transfers_in,
)
from watcher.store.records import SettlementRecord


@dataclass(frozen=True)
class BlockTransfers:
    """The transfers of one block the engine counts: for payments, and as deposits."""

    payments: list[Candidate]
    """Transfers that may pay a watched payment."""
    deposits: list[DepositCandidate]
    """Transfers to a subscription's watched address (one per subscription)."""


NO_TRANSFERS = BlockTransfers([], [])


class PaymentCommits(ChainState):
    """The payment part of a chain's engine (see the module doc)."""

    payments: PaymentIndex
    subscriptions: SubscriptionIndex
    """The standing address watches (deposits: watcher/engine/deposits_*.py)."""
    _payment_logs: dict[str, list[TransferLog]]
    """This poll's ``Transfer`` logs by block hash (set by :meth:`_prefetch_logs`)."""
    _reorged: PaymentIndex
    """After this poll's reorg: the payments whose counted transfers it removes."""

    # -- memory ------------------------------------------------------------------------------

    def _load_payments(self) -> None:
        """Index the payments registered since the last look (one indexed query)."""
        for watch in self.store.payment_watches(self.name, self.payments.max_seq):
            self.payments.add(watch)
        for address in self.store.address_watches(self.name, self.subscriptions.max_seq):
            self.subscriptions.add(address)
        self.subscriptions.set_active(self.store.matched_subscriptions(self.name))

    @property
    def watching_transfers(self) -> bool:
        """Whether a payment or a subscription is watched (transfers matter)."""
        return bool(self.payments.by_id) or self.subscriptions.active

    def _follow_payments(self, changed: Sequence[SettlementRecord]) -> None:
        """After a commit: forget payments no longer watched, re-index reversed ones."""
        back: list[str] = []
        for rec in changed:
            if not rec.watching:
                self.payments.remove(rec.settlement_id)
            elif rec.kind == PAYMENT_KIND and rec.settlement_id not in self.payments.by_id:
                back.append(rec.settlement_id)
        if back:
            for watch in self.store.payment_watches(self.name, 0, ids=back):
                self.payments.add(watch)

    # -- before the transactions -------------------------------------------------------------

    def _prefetch_logs(
        self, blocks: Sequence[Block], reorg: Reorg | None = None
    ) -> Sequence[Block]:
        """The poll's one ``eth_getLogs`` (none without a watched token payment), kept by
        block hash; returns the blocks to process. After a reorg, the payments whose
        transfers it removes (confirmed ones too: not watched) are asked for as well: the
        new branch may include their transfers again.

        A node that refuses the range (a provider's cap on blocks or results) is asked for
        the first half, and so on: only the blocks covered are processed in this poll, the
        rest in the next ones. Raises :class:`ChainInconsistent` for a log of another
        branch, the node's error when even one block is refused."""
        self._payment_logs = {}
        self._reorged = PaymentIndex()
        if reorg is not None and blocks:
            for watch in self.store.payments_paid_above(self.name, reorg.common_ancestor.number):
                self._reorged.add(watch)
        tokens = set(self.payments.tokens) | set(self._reorged.tokens)
        deposit_tokens = self.subscriptions.tokens() if self.subscriptions.active else set()
        if not blocks or not (tokens or deposit_tokens):
            return blocks
        recipients: AbstractSet[str] = (
            self.payments.token_recipients() | self._reorged.token_recipients()
        )
        if deposit_tokens:
            tokens |= deposit_tokens
            watched = self.subscriptions.addresses()  # kept between polls: not copied
            recipients = recipients | watched if recipients else watched
        while True:
            first, last = blocks[0].header.number, blocks[-1].header.number
            try:
                found = transfer_logs(self.client, first, last, tokens, recipients)
                break
            except RpcErrorResponse:
                if len(blocks) == 1:
                    raise
                blocks = blocks[: len(blocks) // 2]
        ours: dict[int, str] = {b.header.number: b.header.hash for b in blocks}
        for log in found:
            want = ours.get(log.block_number)
            if want is None:
                continue
            if log.block_hash != want:
                raise ChainInconsistent(
                    f"{self.name}: eth_getLogs answered for block {log.block_number} "
                    f"{log.block_hash}, but the block processed there is {want} (the node "
                    "moved to another branch): retrying"
                )
            self._payment_logs.setdefault(want, []).append(log)
        return blocks

    def _payment_candidates(self, block: Block | None, reorg: Reorg | None) -> BlockTransfers:
        """The block's transfers that may pay a watched payment, and its deposits (receipts
        fetched only for a block with a native value transfer to a watched address)."""
        extra = getattr(self, "_reorged", None)
        paying = bool(self.payments.by_id or (extra and extra.by_id))
        if block is None or not (paying or self.subscriptions.active):
            return NO_TRANSFERS
        lookup = self._lookup(extra)
        native = native_txs(block, lookup) if paying else []
        native += native_deposit_txs(block, self.subscriptions)
        statuses: dict[str, int] = {}
        if native:
            wanted = list(dict.fromkeys(tx.hash for _, tx in native))
            receipts = checked_receipts(self.client, self.facts, block.header.hash, wanted)
            statuses = {r.tx_hash: r.status for r in receipts}
            missing = [h for h in wanted if h not in statuses]
            if missing:
                raise ChainInconsistent(
                    f"{self.name}: block {block.header.number} lists {len(missing)} payment "
                    f"tx(s) without receipts (first {missing[0]}): retrying"
                )
        logs = getattr(self, "_payment_logs", {}).get(block.header.hash, [])
        paid = candidates(block, lookup, statuses, logs) if paying else []
        return BlockTransfers(paid, deposit_candidates(block, self.subscriptions, statuses, logs))

    def _lookup(self, extra: PaymentIndex | None) -> Lookup:
        """Who a transfer may pay: the watched payments and, in this poll's blocks after a
        reorg, those whose transfers it removed (``extra``: a confirmed one must find its
        transfer re-included on the new branch)."""
        if extra is None or not extra.by_id:
            return self.payments.watching

        def both(asset: str, to: str) -> list[PaymentWatch]:
            merged = {w.settlement_id: w for w in self.payments.watching(asset, to)}
            merged.update((w.settlement_id, w) for w in extra.watching(asset, to))
            return sorted(merged.values(), key=lambda w: w.seq)

        return both

    # -- inside a block's transaction ----------------------------------------------------------

    def _payment_writes(
        self,
        txn: BlockTxn,
        block: Block | None,
        reorg: Reorg | None,
        found: BlockTransfers,
        pos: ChainPosition,
        now: int,
    ) -> tuple[list[SettlementRecord], int]:
        """Undo a reorg's transfers, count the block's, decide every payment that may have
        changed. Returns (the payments as now stored, decisions that changed something)."""
        touched: set[str] = set()
        reversed_ids: set[str] = set()
        reversal = None
        if reorg is not None:
            dropped = self._drop_reorged(txn, reorg)
            touched = {t.settlement_id for t in dropped}
            reversed_ids = {
                r.settlement_id
                for r in txn.by_ids(sorted(touched))
                if r.verdict == Verdict.FINALITY_CONFIRMED
            }
            reversal = _reversal(reorg, dropped, txn.now)
            self._report_reorged(txn, reorg, dropped)
        if block is not None and (found.payments or found.deposits):
            counted = self._allocate(txn, found.payments)
            subs = self.subscriptions.records
            counted += deposit_writes(txn, self.config, self.plan, subs, found.deposits)
            add_transfers(txn, block.header.number, counted)
        late_ms = int(self.config.late_watch_s * 1000)
        ripe = (pos.head_number, pos.finalized_number, pos.safe_number)
        due = {r.settlement_id: r for r in payments_due(txn, late_ms, *ripe)}
        for r in txn.by_ids(sorted(touched - set(due))):
            due[r.settlement_id] = r
        if not due:
            return [], 0
        ids = list(due)
        specs, transfers = specs_in(txn, ids), transfers_in(txn, ids)
        rules = self._rules(reversal=reversal)
        items = [(r, specs[i], transfers.get(i, []), i in reversed_ids) for i, r in due.items()]
        decided = decide_payment_settlements(txn, items, pos, now, rules)
        decisions = sum(self._count(d) for d in decided)
        return txn.by_ids(ids), decisions

    def _report_reorged(self, txn: BlockTxn, reorg: Reorg, dropped: list[TransferRecord]) -> None:
        """One ``payment_transfer_reorged`` event (and its alerts) per payment that lost a
        counted transfer: the ``reorg`` event's ``touched`` lists txs only."""
        anc = reorg.common_ancestor
        ids = sorted({t.settlement_id for t in dropped})
        deposits = deposits_in(txn, ids)
        for t in dropped:
            dep = deposits.get(t.settlement_id)
            if dep is not None:
                payload = deposit_payload(dep.subscription_id, dep.address, dep.asset, t)
                payload.update(depth=reorg.depth)
                record_event(
                    txn, self.plan, "deposit_reorged", "warning", payload, dep.settlement_id
                )
        for sid in ids:
            if sid in deposits:
                continue
            removed = [_transfer_json(t) for t in dropped if t.settlement_id == sid]
            payload = {
                "settlement_id": sid,
                "depth": reorg.depth,
                "common_ancestor": {"number": anc.number, "hash": anc.hash},
                "removed": removed,
            }
            record_event(txn, self.plan, "payment_transfer_reorged", "warning", payload, sid)

    def _drop_reorged(self, txn: BlockTxn, reorg: Reorg) -> list[TransferRecord]:
        """Delete the transfers counted in the blocks the reorg replaced."""
        dropped = drop_transfers_above(txn, reorg.common_ancestor.number)
        if reorg.beyond_window:
            gone = [b.old_hash for b in reorg.replaced if b.number <= reorg.common_ancestor.number]
            dropped += drop_transfers_in(txn, gone)
        return dropped

    def _allocate(self, txn: BlockTxn, found: list[Candidate]) -> list[NewTransfer]:
        """Give each transfer to the oldest of its payments not yet fully paid."""
        ids = sorted({sid for c in found for sid in c.payments})
        specs = specs_in(txn, ids)
        paid = {sid: sum(int(t.value) for t in ts) for sid, ts in transfers_in(txn, ids).items()}
        out: list[NewTransfer] = []
        for cand in found:
            live = [sid for sid in cand.payments if sid in specs]
            if not live:
                continue
            owed = [sid for sid in live if paid.get(sid, 0) < int(specs[sid].amount)]
            chosen = owed[0] if owed else live[0]
            value = int(cand.transfer.value)
            paid[chosen] = paid.get(chosen, 0) + value
            out.append(replace(cand.transfer, settlement_id=chosen))
        return out


def _transfer_json(t: TransferRecord) -> dict[str, object]:
    return {
        "tx_hash": t.tx_hash,
        "block_number": t.block_number,
        "block_hash": t.block_hash,
        "log_index": t.log_index,
        "value": t.value,
    }


def _reversal(reorg: Reorg, dropped: list[TransferRecord], now: int) -> Reversal:
    """The reversal a confirmed payment that lost a transfer is re-decided under."""
    anc = reorg.common_ancestor
    return Reversal(
        reason=f"reorg of depth {reorg.depth} past block {anc.number + 1} removed a counted transfer",
        evidence=Evidence.of(
            "reorg",
            UnixMillis(now),
            depth=reorg.depth,
            common_ancestor={"number": anc.number, "hash": anc.hash},
            removed=[dict(_transfer_json(t), settlement_id=t.settlement_id) for t in dropped],
        ),
    )
