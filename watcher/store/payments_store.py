"""Payments to an address as stored: their spec and the transfers counted for them.

A payment is a settlement row (kind ``evm_payment``; listing, deliveries, receipts, events
and dependent state work as for a tx) whose ``tx_hash`` holds its own settlement id, so no
tx ever matches it and (chain, tx_hash, owner) stays unique; it is never probed by hash
(``next_probe_at`` NULL). Beside it: ``payment_specs`` (what it waits for) and
``payment_transfers`` (what was counted, while its block is canonical).

:class:`PaymentQueries` is part of :class:`~watcher.store.store.Store` (registration and
reads); the functions taking a :class:`~watcher.store.block_txn.BlockTxn` are the engine's
writes inside a block's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from sqlalchemy import CompoundSelect, Select, and_, delete, insert, or_, select
from sqlalchemy.engine import Connection

from chains.quorum import Anchor
from guard.payment import ADDRESS_KINDS, DEPOSIT_KIND, PAYMENT_KIND
from guard.settlement import Verdict
from watcher.store import poll_queries as pq
from watcher.store import schema as s
from watcher.store.block_txn import BlockTxn
from watcher.store.conditions import (
    deadline_reasons,
    deposit_key_ranges,
    rule_reached,
    watched_in,
)
from watcher.store.db import Db
from watcher.store.deposits_store import deposit_specs, lower_deposit_blocks
from watcher.store.driver_sql import insert_many
from watcher.store.errors import SettlementNotFound, StoreConflict, StoreError
from watcher.store.payment_records import (
    NewPaymentSpec,
    NewTransfer,
    PaymentSpecRecord,
    PaymentState,
    PaymentWatch,
    TransferRecord,
    payment_spec_values,
)
from watcher.store.records import NewSettlement, SettlementRecord, from_row
from watcher.store.settlements_store import settlement_values


class PaymentConflict(StoreError):
    """A registration repeats an idempotency key with a different payment."""

    def __init__(self, settlement_id: str, field: str) -> None:
        super().__init__(
            f"reference: already used for payment {settlement_id} with a different {field}"
        )
        self.settlement_id = settlement_id
        self.field = field


def spec_conflict(stored: PaymentSpecRecord, chain: str, spec: NewPaymentSpec) -> str | None:
    """The first field in which a repeated registration differs from the stored payment
    (None: the same payment)."""
    for field, mine, theirs in (
        ("to", spec.to_address, stored.to_address),
        ("asset", spec.asset, stored.asset),
        ("amount", spec.amount, stored.amount),
        ("from", spec.sender, stored.sender),
        ("chain", chain, stored.chain),
    ):
        if mine != theirs:
            return field
    return None


class PaymentQueries:
    """Registration and reads of payments; part of :class:`~watcher.store.store.Store`."""

    _writer: Db
    _reader: Db

    def register_payment(
        self, new: NewSettlement, spec: NewPaymentSpec
    ) -> tuple[SettlementRecord, bool]:
        """Insert a payment's settlement row and spec in one transaction; if its id exists
        (the same idempotency key), return the stored one and False, or raise
        :class:`PaymentConflict` when the stored spec differs."""
        row = {**settlement_values(new), "kind": PAYMENT_KIND}
        try:
            with self._writer.begin() as conn:
                conn.execute(insert(s.settlements).values(**row))
                values = payment_spec_values(new.settlement_id, new.chain, spec)
                conn.execute(insert(s.payment_specs).values(**values))
        except StoreConflict:
            field = spec_conflict(self.payment_spec(new.settlement_id), new.chain, spec)
            if field is not None:
                raise PaymentConflict(new.settlement_id, field) from None
            return self._settlement(new.settlement_id), False
        return self._settlement(new.settlement_id), True

    def _settlement(self, settlement_id: str) -> SettlementRecord:
        with self._reader.connect() as conn:
            row = (
                conn.execute(
                    select(s.settlements).where(s.settlements.c.settlement_id == settlement_id)
                )
                .mappings()
                .first()
            )
        if row is None:
            raise SettlementNotFound(settlement_id)
        return from_row(SettlementRecord, row)

    def payment_spec(self, settlement_id: str) -> PaymentSpecRecord:
        """What the payment waits for; raises :class:`SettlementNotFound`."""
        t = s.payment_specs
        with self._reader.connect() as conn:
            row = conn.execute(select(t).where(t.c.settlement_id == settlement_id)).mappings()
            found = row.first()
            deposit = deposit_specs(conn, [settlement_id]) if found is None else {}
        if found is None and settlement_id in deposit:
            return deposit[settlement_id]  # a deposit's spec is in its own row
        if found is None:
            raise SettlementNotFound(settlement_id)
        return from_row(PaymentSpecRecord, found)

    def payment_transfers(self, settlement_id: str) -> list[TransferRecord]:
        """The transfers counted for the payment now (each in a canonical block we
        processed), in chain order: block, tx, log."""
        with self._reader.connect() as conn:
            return _transfers(conn, [settlement_id]).get(settlement_id, [])

    def payment_watches(
        self, chain: str, after_seq: int = 0, ids: Sequence[str] | None = None
    ) -> list[PaymentWatch]:
        """Watched payments of ``chain`` inserted after ``after_seq`` (or among ``ids``), in
        order: what the engine's payment index is built from."""
        t = s.settlements
        if ids is None:  # every poll: the statement built once
            params = {"q_chain": chain, "q_seq": after_seq}
            return self._watches(pq.payment_watches(), params)
        conds = [t.c.watching.is_(True), t.c.seq > after_seq, t.c.settlement_id.in_(list(ids))]
        return self._watches(pq.payment_watch_query(chain, *conds))

    def payments_paid_above(self, chain: str, number: int) -> list[PaymentWatch]:
        """Payments of ``chain`` (any verdict) with a transfer counted above block
        ``number``: the ones a reorg there touches, whose transfer the new branch may
        include again."""
        t, x = s.settlements, s.payment_transfers
        paid = select(x.c.settlement_id).where(x.c.chain == chain, x.c.block_number > number)
        return self._watches(pq.payment_watch_query(chain, t.c.settlement_id.in_(paid.distinct())))

    def payment_anchors(self, chain: str) -> list[Anchor]:
        """Per watched payment with counted transfers: its highest transfer's block (whose
        hash commits to every block below it), what the finality gate is asked about."""
        t, x = s.settlements, s.payment_transfers
        query = (
            select(x.c.settlement_id, x.c.block_number, x.c.block_hash, t.c.required_confirmations)
            .join(t, t.c.settlement_id == x.c.settlement_id)
            .where(x.c.chain == chain, t.c.watching.is_(True))
            .order_by(x.c.block_number)
        )
        with self._reader.connect() as conn:
            rows = conn.execute(query).all()
        top = {r[0]: r for r in rows}  # ordered by block: the last one per payment wins
        return [Anchor(sid, r[1], r[2], r[1] + r[3] - 1) for sid, r in top.items()]

    def _watches(
        self, query: Select[Any], params: dict[str, Any] | None = None
    ) -> list[PaymentWatch]:
        """The payment watches ``query`` (:func:`~watcher.store.poll_queries.payment_watch_query`)
        selects."""
        with self._reader.connect() as conn:
            rows = conn.execute(query, params).mappings().all()
        return [from_row(PaymentWatch, r) for r in rows]


def _transfers(conn: Connection, ids: Sequence[str]) -> dict[str, list[TransferRecord]]:
    """Transfers of the payments ``ids``, by settlement, in chain order."""
    t = s.payment_transfers
    out: dict[str, list[TransferRecord]] = {}
    if not ids:
        return out
    rows = (
        conn.execute(
            select(t)
            .where(t.c.settlement_id.in_(list(ids)))
            .order_by(t.c.block_number, t.c.tx_index, t.c.log_index, t.c.id)
        )
        .mappings()
        .all()
    )
    for row in rows:
        rec = from_row(TransferRecord, row)
        out.setdefault(rec.settlement_id, []).append(rec)
    return out


# -- inside a block's transaction ---------------------------------------------------------


def specs_in(txn: BlockTxn, ids: Sequence[str]) -> dict[str, PaymentSpecRecord]:
    """The specs of the payments ``ids``."""
    if not ids:
        return {}
    t = s.payment_specs
    rows = txn.conn.execute(select(t).where(t.c.settlement_id.in_(list(ids)))).mappings().all()
    found = {r["settlement_id"]: from_row(PaymentSpecRecord, r) for r in rows}
    if len(found) < len(set(ids)):  # deposits keep their spec in their own row
        found.update(deposit_specs(txn.conn, [i for i in ids if i not in found]))
    return found


def transfers_in(txn: BlockTxn, ids: Sequence[str]) -> dict[str, list[TransferRecord]]:
    """The counted transfers of the payments ``ids``, by settlement, in chain order."""
    return _transfers(txn.conn, ids)


def add_transfers(
    txn: BlockTxn,
    block_number: int,
    transfers: Sequence[NewTransfer],
    fresh: AbstractSet[str] = frozenset(),
) -> None:
    """Count ``transfers`` of one block; those stored for that height before (a block
    processed again after a crash before its commit cannot leave any, but a re-scan may)
    are replaced, so a block's transfers are counted once. A deposit counted here that was
    stored before (a re-inclusion, a block scanned again; not one of ``fresh``, stored in
    this block with its keys) gets its block keys lowered to this block
    (:func:`~watcher.store.deposits_store.lower_deposit_blocks`)."""
    t = s.payment_transfers
    txn.conn.execute(delete(t).where(t.c.chain == txn.chain, t.c.block_number == block_number))
    if transfers:
        # vars(), not asdict(): flat rows of strings and ints need no deep copy (1,000
        # deposits a block spent ~50 ms in asdict's recursion).
        # One executemany on the driver's cursor (watcher/store/driver_sql.py).
        insert_many(txn.conn, t, [{**vars(n), "chain": txn.chain} for n in transfers])
        again = {n.settlement_id for n in transfers} - fresh
        lower_deposit_blocks(txn, block_number, again)


def drop_transfers_above(txn: BlockTxn, number: int) -> list[TransferRecord]:
    """A reorg replaced the blocks above ``number``: delete the transfers counted there and
    return them (their payments are re-decided; a confirmed one is a finality violation)."""
    t = s.payment_transfers
    rows = (
        txn.conn.execute(
            select(t).where(t.c.chain == txn.chain, t.c.block_number > number).order_by(t.c.id)
        )
        .mappings()
        .all()
    )
    if rows:
        txn.conn.execute(delete(t).where(t.c.chain == txn.chain, t.c.block_number > number))
    return [from_row(TransferRecord, r) for r in rows]


def drop_transfers_in(txn: BlockTxn, block_hashes: Sequence[str]) -> list[TransferRecord]:
    """Delete (and return) the transfers counted in ``block_hashes`` (blocks a reorg beyond
    the window proved gone)."""
    if not block_hashes:
        return []
    t = s.payment_transfers
    cond = and_(t.c.chain == txn.chain, t.c.block_hash.in_(list(block_hashes)))
    rows = txn.conn.execute(select(t).where(cond)).mappings().all()
    if rows:
        txn.conn.execute(delete(t).where(cond))
    return [from_row(TransferRecord, r) for r in rows]


def payment_states(txn: BlockTxn, ids: Sequence[str]) -> list[PaymentState]:
    """Id, kind and watching of the payments ``ids`` as now stored, in registration order
    (what the payment index follows; reading whole rows back with their decisions cost a
    block finalizing 1,000 deposits a tenth of its time)."""
    if not ids:
        return []
    t = s.settlements
    rows = txn.conn.execute(
        select(t.c.settlement_id, t.c.kind, t.c.watching)
        .where(t.c.chain == txn.chain, t.c.settlement_id.in_(list(ids)))
        .order_by(t.c.seq)
    ).all()
    return [PaymentState(sid, kind, bool(watching)) for sid, kind, watching in rows]


def _not_plain(plain_deposits: bool) -> list[Any]:
    """The condition leaving out what :func:`~watcher.store.deposits_ripe.ripe_deposits`
    reads (an awaiting deposit past its deadline is due by its deadline)."""
    if plain_deposits:
        return []
    return [s.settlements.c.verdict != Verdict.AWAITING_FINALITY]


def _may_be_due(
    txn: BlockTxn, head: int, finalized: int | None, safe: int | None
) -> CompoundSelect[tuple[int]]:
    """The chain's watched rows :func:`payments_due` may pick, each reason through an index
    of its own: the payments (``ix_settlements_kind``), the deposits whose rule may be
    reached (:func:`~watcher.store.conditions.deposit_key_ranges`), the deadlines passed
    (``ix_settlements_deadline``) — :func:`~watcher.store.conditions.watched_in`."""
    t = s.settlements
    # A late watch ends after the deadline: ``deadline <= now`` holds every row either
    # deadline reason names.
    ranges = [
        t.c.kind == PAYMENT_KIND,
        *deposit_key_ranges(head, finalized, safe),
        t.c.deadline <= txn.now,
    ]
    return watched_in(txn.chain, ranges)


def payments_due(
    txn: BlockTxn,
    late_watch_ms: int,
    head: int,
    finalized: int | None = None,
    safe: int | None = None,
    plain_deposits: bool = True,
) -> list[SettlementRecord]:
    """Watched payments and deposits whose verdict may change now: payments with counted
    transfers (they may have become final), deposits whose transfer's block is final under
    the deposit's own rule at ``head`` and the ``finalized``/``safe`` heights
    (:func:`~watcher.store.conditions.rule_reached`), and those whose deadline (or late
    watch) passed. A deposit is not decided while its one transfer is merely deeper than
    before, or deep but short of its rule's tag: nothing about it can change until then (a
    reorg that takes the transfer out decides it anyway). ``plain_deposits`` False leaves
    out the ripe deposits awaiting finality before their deadline: the caller reads those
    narrowly (:func:`watcher.store.deposits_ripe.ripe_deposits`).

    The transfers are looked up per watched payment (``EXISTS`` on the settlement's own
    transfers, by index), not scanned: the transfers of final deposits stay while their
    blocks are canonical, so a scan grew with every deposit ever seen. And only for the
    rows that index ranges name (:func:`_may_be_due`), not for every watched deposit: on
    Ethereum 64 blocks of deposits await the finalized tag."""
    t, x = s.settlements, s.payment_transfers
    own = x.c.settlement_id == t.c.settlement_id
    with_transfers = select(x.c.id).where(own).exists()
    ripe = rule_reached(
        x.c.block_number, t.c.required_confirmations, t.c.finality_mode, head, finalized, safe
    )
    ripe_transfer = select(x.c.id).where(own, ripe).exists()
    rows = (
        txn.conn.execute(
            select(t)
            .where(
                t.c.seq.in_(_may_be_due(txn, head, finalized, safe)),
                t.c.kind.in_(ADDRESS_KINDS),
                or_(
                    and_(t.c.kind == PAYMENT_KIND, with_transfers),
                    # The verdict before the transfer's lookup: the narrow read takes the
                    # awaiting ones, and a lookup apiece of them here was a scan's cost.
                    and_(t.c.kind == DEPOSIT_KIND, *_not_plain(plain_deposits), ripe_transfer),
                    *deadline_reasons(txn.now, late_watch_ms),
                ),
            )
            .order_by(t.c.seq)
        )
        .mappings()
        .all()
    )
    return [from_row(SettlementRecord, r) for r in rows]
