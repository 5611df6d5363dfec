"""Invoices as stored: each beside its ``evm_payment`` settlement and payment spec.

An invoice's address is derived at the next index of its extended public key; the
``(key_id, derivation_index)`` pair is unique, so two instances that pick the same index
race on the insert and the loser asks again (:class:`InvoiceIndexTaken`): an index, hence
an address, is never handed out twice, across restarts and instances. Rows are never
deleted, so an index is never reused either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, insert, select, update

from watcher.store import schema as s
from watcher.store.block_txn import BlockTxn
from watcher.store.db import Db
from watcher.store.errors import SettlementNotFound, StoreConflict
from watcher.store.owned import owned_row
from watcher.store.payment_records import NewPaymentSpec, payment_spec_values
from watcher.store.records import NewSettlement, from_row
from watcher.store.settlements_store import settlement_values


class InvoiceNotFound(SettlementNotFound):
    """No invoice with this id (of this owner)."""


class InvoiceIndexTaken(StoreConflict):
    """Another registration took this derivation index first: derive the next one."""


@dataclass(frozen=True)
class InvoiceRecord:
    """An invoice's own row."""

    invoice_id: str
    """``inv_`` + hex."""
    settlement_id: str
    """Its payment settlement."""
    owner: str
    """Its caller."""
    key_id: str
    """Which extended public key its address was derived from."""
    derivation_index: int
    """The index it was derived at."""
    address: str
    """Where it is paid (lower-case 0x)."""
    expires_at: int
    """Unix ms: its payment's deadline."""
    payment_uri: str
    """The EIP-681 URI."""
    state: str
    """As last recorded (guard.invoice.INVOICE_STATES)."""
    accepted: bool
    """The operator accepted a late payment."""


class InvoiceQueries:
    """Invoices; part of :class:`~watcher.store.store.Store`."""

    _writer: Db
    _reader: Db

    def next_invoice_index(self, key_id: str) -> int:
        """The lowest index above every one used with ``key_id`` (0 for a new key)."""
        t = s.invoices
        with self._reader.connect() as conn:
            top = conn.execute(
                select(func.max(t.c.derivation_index)).where(t.c.key_id == key_id)
            ).scalar()
        return 0 if top is None else int(top) + 1

    def create_invoice(
        self, invoice: InvoiceRecord, new: NewSettlement, spec: NewPaymentSpec
    ) -> None:
        """Store the invoice, its settlement and spec in one transaction; raises
        :class:`InvoiceIndexTaken` when its index was taken meanwhile."""
        t = s.invoices
        try:
            with self._writer.begin() as conn:
                conn.execute(insert(t).values(**invoice.__dict__))
                conn.execute(insert(s.settlements).values(**settlement_values(new)))
                conn.execute(
                    insert(s.payment_specs).values(
                        **payment_spec_values(new.settlement_id, new.chain, spec)
                    )
                )
        except StoreConflict as exc:
            raise InvoiceIndexTaken(str(exc)) from None

    def invoice(self, invoice_id: str, owner: str | None = None) -> InvoiceRecord:
        """One invoice (``owner``'s when given); raises :class:`InvoiceNotFound`."""
        t = s.invoices
        row = owned_row(self._reader, t, t.c.invoice_id, invoice_id, owner)
        if row is None:
            raise InvoiceNotFound(invoice_id)
        return from_row(InvoiceRecord, row)

    def invoices(self, owner: str, after_seq: int, limit: int) -> list[tuple[int, InvoiceRecord]]:
        """Up to ``limit`` of ``owner``'s invoices after the settlement ``seq`` cursor, with
        their seq, oldest first."""
        t, x = s.invoices, s.settlements
        query = (
            select(x.c.seq, t)
            .join(x, x.c.settlement_id == t.c.settlement_id)
            .where(t.c.owner == owner, x.c.seq > after_seq)
            .order_by(x.c.seq)
            .limit(limit)
        )
        with self._reader.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [(int(r["seq"]), from_row(InvoiceRecord, r)) for r in rows]


# -- inside a block's transaction ---------------------------------------------------------


def invoice_of(txn: BlockTxn, settlement_id: str) -> InvoiceRecord | None:
    """The invoice whose payment is ``settlement_id`` (None: a plain payment)."""
    t = s.invoices
    row = txn.conn.execute(select(t).where(t.c.settlement_id == settlement_id)).mappings()
    found = row.first()
    return None if found is None else from_row(InvoiceRecord, found)


def set_invoice_state(
    txn: BlockTxn, invoice_id: str, state: str, accepted: bool | None = None
) -> None:
    """Record an invoice's new state (and that the operator accepted it, when given)."""
    t = s.invoices
    values: dict[str, object] = {"state": state}
    if accepted is not None:
        values["accepted"] = accepted
    txn.conn.execute(update(t).where(t.c.invoice_id == invoice_id).values(**values))


def invoice_ids(txn: BlockTxn, settlement_ids: Sequence[str]) -> set[str]:
    """Those of ``settlement_ids`` that are invoices' payments."""
    if not settlement_ids:
        return set()
    t = s.invoices
    rows = txn.conn.execute(
        select(t.c.settlement_id).where(t.c.settlement_id.in_(list(settlement_ids)))
    )
    return {r[0] for r in rows.all()}
