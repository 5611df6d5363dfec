"""Subscriptions (standing address watches) and their deposits as stored.

A subscription row and its addresses are written by the API (:class:`DepositQueries`, part
of :class:`~watcher.store.store.Store`); the engine reads the addresses of active
subscriptions by insertion order (its index grows with new rows, one indexed query a poll)
and writes deposits inside a block's transaction (:func:`insert_new_deposits`): an
``evm_deposit`` settlement row and its ``deposits`` row (with its spec: the exact amount,
asset, address and sender that arrived), only for ids not stored yet, so a
transfer seen again (a re-processed block, another instance, a re-inclusion after a reorg)
adds no deposit.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import case, insert, or_, select, update
from sqlalchemy.engine import Connection

from guard.payment import DEPOSIT_KIND
from watcher.store import poll_queries as pq
from watcher.store import schema as s
from watcher.store.block_txn import BlockTxn
from watcher.store.conditions import DEPTH_RULES
from watcher.store.db import Db
from watcher.store.deposit_records import (
    AddressWatch,
    DepositRecord,
    NewDeposit,
    NewSubscription,
    SubscriptionRecord,
)
from watcher.store.driver_sql import insert_many
from watcher.store.errors import SettlementNotFound
from watcher.store.owned import owned_row
from watcher.store.payment_records import NewPaymentSpec, PaymentSpecRecord
from watcher.store.records import NewSettlement, SettlementRecord, from_row
from watcher.store.settlements_store import settlement_values


class SubscriptionNotFound(SettlementNotFound):
    """No subscription with this id (of this owner)."""


class DepositQueries:
    """Subscriptions and deposits; part of :class:`~watcher.store.store.Store`."""

    _writer: Db
    _reader: Db

    def create_subscription(self, new: NewSubscription, addresses: Sequence[str]) -> None:
        """Store a subscription and its addresses in one transaction."""
        row = {
            "subscription_id": new.subscription_id,
            "chain": new.chain,
            "owner": new.owner,
            "assets": json.dumps(list(new.assets)),
            "confirmations": new.confirmations,
            "commit_url": new.commit_url,
            "reference": new.reference,
            "after_block": new.after_block,
            "active": True,
            "created_at": new.created_at,
        }
        with self._writer.begin() as conn:
            conn.execute(insert(s.subscriptions).values(**row))
            _insert_addresses(conn, new.subscription_id, new.chain, addresses, new.after_block)

    def add_subscription_addresses(
        self, subscription_id: str, owner: str, addresses: Sequence[str], after_block: int | None
    ) -> int:
        """Watch more addresses (those already watched are skipped); returns how many were
        added. Raises :class:`SubscriptionNotFound`."""
        sub = self.subscription(subscription_id, owner)
        t = s.subscription_addresses
        with self._writer.begin() as conn:
            have = {
                r[0]
                for r in conn.execute(
                    select(t.c.address).where(t.c.subscription_id == subscription_id)
                ).all()
            }
            fresh = [a for a in dict.fromkeys(addresses) if a not in have]
            _insert_addresses(conn, subscription_id, sub.chain, fresh, after_block)
        return len(fresh)

    def subscription(self, subscription_id: str, owner: str | None = None) -> SubscriptionRecord:
        """One subscription (``owner``'s when given); raises :class:`SubscriptionNotFound`."""
        t = s.subscriptions
        row = owned_row(self._reader, t, t.c.subscription_id, subscription_id, owner)
        if row is None:
            raise SubscriptionNotFound(subscription_id)
        return from_row(SubscriptionRecord, row)

    def subscriptions(self, owner: str) -> list[SubscriptionRecord]:
        """``owner``'s subscriptions, oldest first."""
        t = s.subscriptions
        with self._reader.connect() as conn:
            rows = (
                conn.execute(select(t).where(t.c.owner == owner).order_by(t.c.created_at))
                .mappings()
                .all()
            )
        return [from_row(SubscriptionRecord, r) for r in rows]

    def address_count(self, subscription_id: str) -> int:
        """How many addresses the subscription watches."""
        t = s.subscription_addresses
        with self._reader.connect() as conn:
            rows = conn.execute(select(t.c.seq).where(t.c.subscription_id == subscription_id)).all()
        return len(rows)

    def stop_subscription(self, subscription_id: str, owner: str) -> SubscriptionRecord:
        """Stop watching (deposits already seen still go to final); raises
        :class:`SubscriptionNotFound`."""
        self.subscription(subscription_id, owner)
        t = s.subscriptions
        with self._writer.begin() as conn:
            conn.execute(
                update(t).where(t.c.subscription_id == subscription_id).values(active=False)
            )
        return self.subscription(subscription_id, owner)

    def matched_subscriptions(self, chain: str) -> dict[str, SubscriptionRecord]:
        """The subscriptions of ``chain`` whose transfers the engine matches, by id: the
        active ones, and deleted ones with a deposit still watched (a reorg may include its
        transfer again; a deleted subscription gets no new deposit)."""
        with self._reader.connect() as conn:
            rows = conn.execute(pq.matched_subscriptions(), {"q_chain": chain}).mappings().all()
        return {r["subscription_id"]: from_row(SubscriptionRecord, r) for r in rows}

    def address_watches(self, chain: str, after_seq: int) -> list[AddressWatch]:
        """Watched addresses of ``chain`` inserted after ``after_seq``, in order."""
        params = {"q_chain": chain, "q_seq": after_seq}
        with self._reader.connect() as conn:
            rows = conn.execute(pq.address_watches(), params).all()
        return [AddressWatch(*row) for row in rows]

    def deposit(self, settlement_id: str) -> DepositRecord:
        """A deposit's own row; raises :class:`SettlementNotFound`."""
        t = s.deposits
        with self._reader.connect() as conn:
            row = conn.execute(select(t).where(t.c.settlement_id == settlement_id)).mappings()
            found = row.first()
        if found is None:
            raise SettlementNotFound(settlement_id)
        return from_row(DepositRecord, found)

    def deposits_of(
        self, subscription_id: str, verdict: str | None, after_seq: int, limit: int
    ) -> list[SettlementRecord]:
        """Up to ``limit`` deposit settlements of a subscription with ``seq > after_seq``, in
        order, of ``verdict`` when given."""
        t, d = s.settlements, s.deposits
        query = (
            select(t)
            .join(d, d.c.settlement_id == t.c.settlement_id)
            .where(d.c.subscription_id == subscription_id, t.c.seq > after_seq)
        )
        if verdict is not None:
            query = query.where(t.c.verdict == verdict)
        with self._reader.connect() as conn:
            rows = conn.execute(query.order_by(t.c.seq).limit(limit)).mappings().all()
        return [from_row(SettlementRecord, r) for r in rows]


def _insert_addresses(
    conn: object, subscription_id: str, chain: str, addresses: Sequence[str], after: int | None
) -> None:
    if not addresses:
        return
    rows = [
        {"subscription_id": subscription_id, "chain": chain, "address": a, "after_block": after}
        for a in addresses
    ]
    conn.execute(insert(s.subscription_addresses), rows)  # type: ignore[attr-defined]


# -- inside a block's transaction ---------------------------------------------------------


def known_deposits(txn: BlockTxn, ids: Sequence[str]) -> set[str]:
    """Those of ``ids`` already stored as deposits."""
    if not ids:
        return set()
    t = s.deposits
    rows = txn.conn.execute(select(t.c.settlement_id).where(t.c.settlement_id.in_(list(ids))))
    return {r[0] for r in rows.all()}


def deposit_row(new: NewSettlement, block: int) -> dict[str, Any]:
    """The settlement row of a new deposit (``evm_deposit``) counted in ``block``: its
    ``transfer_block``, and under a rule with a depth basis its ``confirm_height``, the keys
    by which a block finds the deposits it may make final (:mod:`watcher.store.deposits_ripe`)."""
    deep = block + new.required_confirmations - 1 if new.finality_mode in DEPTH_RULES else None
    return {
        **settlement_values(new),
        "kind": DEPOSIT_KIND,
        "transfer_block": block,
        "confirm_height": deep,
    }


def deposit_rows_alike(
    first: dict[str, Any], others: Sequence[tuple[str, str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The settlement rows of deposits registered alike with ``first`` (:func:`deposit_row`:
    same subscription, same instant), each (settlement id, digest, decision JSON) of its own
    first decision: every other column is ``first``'s (a row is a copy of its dict, not a
    record built and converted again per deposit)."""
    return [
        {**first, "settlement_id": sid, "tx_hash": sid, "digest": digest, "decision": decision}
        for sid, digest, decision in others
    ]


def insert_new_deposits(
    txn: BlockTxn, rows: Sequence[tuple[dict[str, Any], NewPaymentSpec, NewDeposit]]
) -> None:
    """Store deposits (their ids must be new: see :func:`known_deposits`), each its
    settlement row (:func:`deposit_row`) and its deposit row holding its spec (the amount and
    sender that arrived: no ``payment_specs`` row since 0021): two ``executemany`` on the
    driver's cursor (watcher/store/driver_sql.py), not SQLAlchemy's per-row parameter
    processing (a block of 1,000 deposits spent a third of its insert time there)."""
    if not rows:
        return
    chain = txn.chain
    deposits = [
        {
            "settlement_id": d.settlement_id,
            "subscription_id": d.subscription_id,
            "chain": chain,
            "tx_hash": d.tx_hash,
            "ordinal": d.ordinal,
            "address": d.address,
            "asset": d.asset,
            "amount": spec.amount,
            "sender": spec.sender,
        }
        for _, spec, d in rows
    ]
    insert_many(txn.conn, s.settlements, [row for row, _, _ in rows])
    insert_many(txn.conn, s.deposits, deposits)


def deposit_specs(conn: Connection, ids: Sequence[str]) -> dict[str, PaymentSpecRecord]:
    """The specs of those of ``ids`` that are deposits, from their own rows (since 0021 a
    deposit has no ``payment_specs`` row: its spec is its address, asset, amount and
    sender, exactly what arrived)."""
    return deposit_specs_and_subscriptions(conn, ids)[0]


def deposit_specs_and_subscriptions(
    conn: Connection, ids: Sequence[str]
) -> tuple[dict[str, PaymentSpecRecord], dict[str, str]]:
    """:func:`deposit_specs` and the subscription of each of those deposits, from the same
    rows in one read (a block deciding 1,000 deposits read them a second time for the
    subscriptions its events name)."""
    if not ids:
        return {}, {}
    d = s.deposits
    query = select(
        d.c.settlement_id,
        d.c.chain,
        d.c.address,
        d.c.asset,
        d.c.amount,
        d.c.sender,
        d.c.subscription_id,
    ).where(d.c.settlement_id.in_(list(ids)))
    specs: dict[str, PaymentSpecRecord] = {}
    subscriptions: dict[str, str] = {}
    for sid, chain, address, asset, amount, sender, sub in conn.execute(query).all():
        specs[sid] = PaymentSpecRecord(sid, chain, address, asset, amount, sender, None, None)
        subscriptions[sid] = sub
    return specs, subscriptions


def deposits_in(txn: BlockTxn, ids: Sequence[str]) -> dict[str, DepositRecord]:
    """The deposit rows of ``ids`` (those that are deposits)."""
    if not ids:
        return {}
    t = s.deposits
    rows = txn.conn.execute(select(t).where(t.c.settlement_id.in_(list(ids)))).mappings().all()
    return {r["settlement_id"]: from_row(DepositRecord, r) for r in rows}


def subscriptions_of(txn: BlockTxn, ids: Sequence[str]) -> dict[str, str]:
    """The subscription of each deposit of ``ids`` (those that are deposits)."""
    if not ids:
        return {}
    t = s.deposits
    query = select(t.c.settlement_id, t.c.subscription_id).where(t.c.settlement_id.in_(list(ids)))
    return {sid: sub for sid, sub in txn.conn.execute(query).all()}


def lower_deposit_blocks(txn: BlockTxn, block_number: int, ids: Collection[str]) -> None:
    """Those of ``ids`` that are deposits, counted again in ``block_number`` (a re-inclusion
    after a reorg, a block scanned again): their ``transfer_block`` lowered to it where it
    was above it or unset, and under a rule with a depth basis their ``confirm_height`` with
    it. A key left lower than the deposit's counted transfers (the transfer a reorg dropped)
    only makes it read once its rule might be reached, and the read checks its transfers;
    a key above them would leave it unread when it is final, so none is ever left above."""
    if not ids:
        return
    t = s.settlements
    deep = case(
        (t.c.finality_mode.in_(sorted(DEPTH_RULES)), block_number + t.c.required_confirmations - 1),
        else_=t.c.confirm_height,
    )
    txn.conn.execute(
        update(t)
        .where(
            t.c.chain == txn.chain,
            t.c.settlement_id.in_(sorted(ids)),
            t.c.kind == DEPOSIT_KIND,
            or_(t.c.transfer_block.is_(None), t.c.transfer_block > block_number),
        )
        .values(transfer_block=block_number, confirm_height=deep)
    )
