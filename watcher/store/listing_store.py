"""Listing settlements page by page, and registering many in one transaction.

The listing is keyset-paginated on ``seq`` (the insertion order): a page never repeats or
skips a row when settlements are registered or decided between two pages, and each page is
one indexed range scan however deep the caller has read. The batch registration is one
transaction: the rows that are new are inserted, the ones already registered (same chain, tx
hash and owner) are returned as they are stored, and nothing is half-written if the store
fails. A page for an API caller lists only its own settlements (``owner``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any, Protocol

from sqlalchemy import Connection, bindparam, select

from chains.finality_modes import FINALITY_MODES
from guard.payment import ADDRESS_KINDS
from watcher.store import schema as s
from watcher.store.db import Db
from watcher.store.errors import SettlementNotFound, StoreConflict
from watcher.store.payment_records import NewPaymentSpec, payment_spec_values
from watcher.store.pg_batch import insert_unnest, stored_seqs
from watcher.store.records import NewSettlement, SettlementRecord, from_row
from watcher.store.row_insert import insert_rows
from watcher.store.settlements_store import settlement_values

Key = tuple[str, str, str]
"""(chain, tx hash, owner): what makes a settlement unique."""

EVM_KIND = "evm_tx"
"""The kind of a chain settlement; a source settlement's kind is its ``finality_mode``."""


class _Dbs(Protocol):
    @property
    def writer(self) -> Db: ...

    @property
    def reader(self) -> Db: ...


class Listing:
    """Settlement pages and batch registration over a store's connections."""

    def __init__(self, writer: Db, reader: Db) -> None:
        self._writer = writer
        self._reader = reader

    def page(
        self,
        *,
        after_seq: int = 0,
        limit: int = 100,
        chain: str | None = None,
        verdict: str | None = None,
        kind: str | None = None,
        owner: str | None = None,
    ) -> list[SettlementRecord]:
        """Up to ``limit`` settlements with ``seq > after_seq``, in ``seq`` order, filtered
        by chain (or source) name, verdict, kind (``evm_tx`` or a source kind) and owner
        (None: every owner's)."""
        t = s.settlements
        query = select(t).where(t.c.seq > after_seq)
        if owner is not None:
            query = query.where(t.c.owner == owner)
        if chain is not None:
            query = query.where(t.c.chain == chain)
        if verdict is not None:
            query = query.where(t.c.verdict == verdict)
        if kind == EVM_KIND:
            query = query.where(t.c.finality_mode.in_(FINALITY_MODES), t.c.kind == EVM_KIND)
        elif kind in ADDRESS_KINDS:
            query = query.where(t.c.kind == kind)
        elif kind is not None:
            query = query.where(t.c.finality_mode == kind)
        with self._reader.connect() as conn:
            rows = conn.execute(query.order_by(t.c.seq).limit(limit)).mappings().all()
        return [from_row(SettlementRecord, row) for row in rows]

    def register_batch(
        self, news: Sequence[NewSettlement], specs: Mapping[str, NewPaymentSpec] | None = None
    ) -> list[tuple[SettlementRecord, bool]]:
        """Register every item in one transaction; per item (stored record, created).
        ``specs``: the payment spec of each payment item, by settlement id (inserted with it).

        An item whose (chain, tx hash, owner) is stored, or repeats an earlier item, is not
        inserted again (created False, the stored row returned). A concurrent registration
        of the same tx makes the insert conflict: the transaction is retried once, and then
        sees that row as existing."""
        try:
            return self._register_batch(news, specs or {})
        except StoreConflict:
            return self._register_batch(news, specs or {})

    def register_one(self, new: NewSettlement) -> tuple[SettlementRecord, int | None, bool]:
        """Register one settlement as a batch item is (``POST /v1/settlements``): (its record
        as stored, its chain's recorded head read in the same transaction, created). Inserted
        and answered from the values inserted (nothing read back but its ``seq``); one its
        owner already registered (chain, tx hash) is answered as stored, with False."""
        key = (new.chain, new.tx_hash, new.owner)
        try:
            with self._writer.begin() as conn:
                return _insert(conn, {key: new})[key], _head(conn, new.chain), True
        except StoreConflict:
            with self._reader.connect() as conn:
                rows = _rows_of(conn, [key], [s.settlements])
                if not rows:  # as Store.register: the row it conflicted with is gone
                    raise SettlementNotFound(f"{new.chain}/{new.tx_hash}") from None
                return from_row(SettlementRecord, rows[0]._mapping), _head(conn, new.chain), False

    def _register_batch(
        self, news: Sequence[NewSettlement], specs: Mapping[str, NewPaymentSpec]
    ) -> list[tuple[SettlementRecord, bool]]:
        keys = list(dict.fromkeys((n.chain, n.tx_hash, n.owner) for n in news))
        with self._writer.begin() as conn:
            stored: dict[Key, SettlementRecord] = {}
            known = list(_seqs_of(conn, keys))  # whole rows only of those already stored
            for row in _rows_of(conn, known, [s.settlements]) if known else []:
                rec = from_row(SettlementRecord, row._mapping)
                stored[(rec.chain, rec.tx_hash, rec.owner)] = rec
            fresh: dict[Key, NewSettlement] = {}
            for new in news:
                key = (new.chain, new.tx_hash, new.owner)
                if key not in stored and key not in fresh:
                    fresh[key] = new
            if fresh:
                stored.update(_insert(conn, fresh))
                paying = [n for n in fresh.values() if n.settlement_id in specs]
                if paying:
                    spec_rows = [
                        payment_spec_values(n.settlement_id, n.chain, specs[n.settlement_id])
                        for n in paying
                    ]
                    conn.execute(s.payment_specs.insert(), spec_rows)
        out: list[tuple[SettlementRecord, bool]] = []
        first_seen: set[Key] = set()
        for new in news:
            key = (new.chain, new.tx_hash, new.owner)
            created = key in fresh and key not in first_seen
            first_seen.add(key)
            out.append((stored[key], created))
        return out


def _insert(conn: Connection, fresh: Mapping[Key, NewSettlement]) -> dict[Key, SettlementRecord]:
    """Insert ``fresh`` and return their records as stored: built from the values inserted
    and the ``seq`` each got. Reading the whole rows back and decoding their JSON was a fifth
    of a batch's time. On SQLite one executemany, then the ``seq``s read back alone (an
    ``INSERT … RETURNING`` of many rows costs SQLAlchemy more than this second statement);
    on PostgreSQL one statement of column arrays answering them (watcher/store/pg_batch.py).
    A column the insert leaves out is NULL, as it is in the row."""
    values = [settlement_values(n) for n in fresh.values()]
    if conn.dialect.name == "postgresql":
        by_id = insert_unnest(conn, values)
        seqs = {key: by_id[new.settlement_id] for key, new in fresh.items()}
    else:
        rowid = insert_rows(conn, values)  # a single row's seq is its rowid
        seqs = _seqs_of(conn, list(fresh)) if rowid is None else dict.fromkeys(fresh, rowid)
    left_out: dict[str, Any] = {name: None for name in _RECORD_FIELDS if name not in values[0]}
    return {
        key: from_row(SettlementRecord, {**row, **left_out, "seq": seqs[key]})
        for key, row in zip(fresh, values, strict=True)
    }


_RECORD_FIELDS = {f.name for f in fields(SettlementRecord)} - {"seq"}
"""What a record holds besides its ``seq``: the values inserted, or NULL (None)."""

_SEQ_COLUMNS = [
    s.settlements.c.chain,
    s.settlements.c.tx_hash,
    s.settlements.c.owner,
    s.settlements.c.seq,
]
_SEQS_SQL = "SELECT tx_hash, seq FROM settlements WHERE chain = ? AND owner = ? AND tx_hash IN "


def _seqs_of(conn: Connection, keys: Sequence[Key]) -> dict[Key, int]:
    """The ``seq`` of each of ``keys`` that is stored, through the unique index as
    :func:`_rows_of`; on SQLite as plain driver SQL (SQLAlchemy expanding 500 hashes into
    an ``IN`` list cost more than SQLite's answer)."""
    if conn.dialect.name == "postgresql":
        return stored_seqs(conn, keys)
    if conn.dialect.name != "sqlite" or conn.dialect.paramstyle != "qmark":
        return {(r[0], r[1], r[2]): r[3] for r in _rows_of(conn, keys, _SEQ_COLUMNS)}
    found: dict[Key, int] = {}
    for (chain, owner), hashes in _by_group(keys).items():
        for start in range(0, len(hashes), _CHUNK):
            chunk = hashes[start : start + _CHUNK]
            sql = _SEQS_SQL + "(" + ", ".join("?" * len(chunk)) + ")"
            for tx_hash, seq in conn.exec_driver_sql(sql, (chain, owner, *chunk)).all():
                found[(chain, tx_hash, owner)] = seq
    return found


def _by_group(keys: Sequence[Key]) -> dict[tuple[str, str], list[str]]:
    """The tx hashes of ``keys`` by (chain, owner)."""
    by_group: dict[tuple[str, str], list[str]] = {}
    for chain, tx_hash, owner in keys:
        by_group.setdefault((chain, owner), []).append(tx_hash)
    return by_group


_CHUNK = 500
"""Tx hashes per ``IN`` list (well under SQLite's bound on parameters)."""


def _rows_of(conn: Connection, keys: Sequence[Key], columns: Sequence[Any]) -> list[Any]:
    """The stored rows of ``keys`` (``columns`` of them), looked up through the unique index:
    ``chain = ? AND owner = ? AND tx_hash IN (…)`` per chain and owner. A row-value
    ``(chain, tx_hash, owner) IN (…)`` is a scan of the whole table on SQLite, so a batch
    cost grew with every settlement ever stored."""
    t = s.settlements
    rows: list[Any] = []
    for (chain, owner), hashes in _by_group(keys).items():
        for start in range(0, len(hashes), _CHUNK):
            query = select(*columns).where(
                t.c.chain == chain,
                t.c.owner == owner,
                t.c.tx_hash.in_(hashes[start : start + _CHUNK]),
            )
            rows.extend(conn.execute(query).all())
    return rows


_HEAD = select(s.chains.c.head_number).where(s.chains.c.name == bindparam("name"))
_HEAD_SQL = "SELECT head_number FROM chains WHERE name = ?"


def _head(conn: Connection, chain: str) -> int | None:
    """``chain``'s recorded head (None before its first block); on SQLite as plain driver
    SQL (SQLAlchemy's execution of a one-value read cost more than SQLite's answer)."""
    if conn.dialect.name == "sqlite" and conn.dialect.paramstyle == "qmark":
        row = conn.exec_driver_sql(_HEAD_SQL, (chain,)).first()
    else:
        row = conn.execute(_HEAD, {"name": chain}).first()
    return None if row is None else row[0]


def listing(store: _Dbs) -> Listing:
    """The listing part of ``store`` (sharing its connections)."""
    return Listing(store.writer, store.reader)
