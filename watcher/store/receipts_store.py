"""Signed receipts and signer addresses in the store (tables ``receipts`` and ``signers``).

A receipt row holds the whole signed document (``body``, as the text the API answers:
watcher/store/receipt_bytes.py), its kind, signer and digest, and
for a revocation the id of the receipt it revokes (``revokes``). Rows are only ever added:
a receipt is withdrawn by a revocation row, never by an update or a delete, so the history a
third party may have seen stays in the store.

The ``signers`` table lists every signing address the daemon has used: the current one has
no ``retired_at``; starting with another key retires the others (key rotation). Receipts
name their signer, so old receipts stay checkable against the published past addresses.

:class:`ReceiptStore` works on the store's engines with its own short transactions; get
one with :func:`receipt_store`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Connection, bindparam, insert, select, update

from guard.event_kinds import LIFECYCLE_EVENT, EventKind
from guard.receipts import DECISION_KINDS, REVOCATION
from watcher.store import events_store, lease_store
from watcher.store import schema as s
from watcher.store.db import Db
from watcher.store.errors import SettlementNotFound, StaleFencingToken
from watcher.store.events_store import TerminalEvent as TerminalEvent  # old home: importable here
from watcher.store.receipt_bytes import BODY_PARAM, answer_bytes, body_text, body_value, encoded
from watcher.store.records import ReceiptRecord as ReceiptRecord  # old home: importable here
from watcher.store.records import SettlementRecord, from_row
from watcher.store.records import SignerRecord as SignerRecord

TERMINAL_EVENTS = (
    *LIFECYCLE_EVENT.values(),
    EventKind.DEPOSIT_CONFIRMED,
    EventKind.FINALITY_VIOLATION,
    EventKind.DECISION_RESTATED,
)
"""Event kinds after which a settlement may need a receipt or a revocation (a deposit that
became final records ``deposit_confirmed``, not ``settlement_confirmed``)."""


def current_receipts(receipts: Sequence[ReceiptRecord]) -> list[ReceiptRecord]:
    """The receipts of a settlement that no revocation withdraws (revocations excluded)."""
    revoked = {r.revokes for r in receipts if r.kind == REVOCATION}
    return [r for r in receipts if r.kind != REVOCATION and r.id not in revoked]


_r = s.receipts
_RECEIPTS_TEXT = (
    select(_r.c.id, _r.c.kind, _r.c.revokes, body_text(_r.c.body))
    .where(_r.c.settlement_id == bindparam("settlement_id"))
    .order_by(_r.c.id)
)
"""A settlement's receipts with their bodies as stored text, built once (a receipt read is
the hot path of ``GET …/receipt``: building the statement cost more than running it)."""
_st = s.settlements
_ANSWER = (
    select(
        _st.c.chain,
        _st.c.verdict,
        _r.c.id,
        _r.c.kind,
        _r.c.revokes,
        body_text(_r.c.body).label("body"),
    )
    .select_from(_st.outerjoin(_r, _r.c.settlement_id == _st.c.settlement_id))
    .where(_st.c.settlement_id == bindparam("settlement_id"), _st.c.owner == bindparam("owner"))
    .order_by(_r.c.id)
)
"""An owner's settlement (its chain and verdict) with its receipts as stored text: what
``GET …/receipt`` reads, in one statement (its columns named, for the raw read's rows)."""


@dataclass(frozen=True)
class ReceiptAnswer:
    """What ``GET /v1/settlements/{id}/receipt`` needs of the store (:meth:`ReceiptStore.answer`)."""

    chain: str
    """The settlement's chain (or source) name."""
    verdict: str
    """Its verdict now."""
    receipt: bytes | None
    """Its current decision receipt as answered (:meth:`ReceiptStore.latest_bytes`), or None."""


def _current_text(rows: Sequence[Any]) -> bytes | None:
    """The answer bytes of the newest decision receipt no revocation withdraws, from rows
    ending in (id, kind, revokes, body text) in order of issue."""
    revoked = {row[-2] for row in rows if row[-3] == REVOCATION}
    current = [row[-1] for row in rows if row[-3] in DECISION_KINDS and row[-4] not in revoked]
    return answer_bytes(current[-1]) if current else None


def _answer_of(settlement_id: str, rows: Sequence[Sequence[Any]]) -> ReceiptAnswer:
    """The :class:`ReceiptAnswer` of :data:`_ANSWER`'s rows (in its column order);
    :class:`SettlementNotFound` for none."""
    if not rows:
        raise SettlementNotFound(settlement_id)
    return ReceiptAnswer(rows[0][0], rows[0][1], _current_text(rows))


class ReceiptStore:
    """Reads and writes of the receipts and signers tables."""

    def __init__(self, writer: Db, reader: Db) -> None:
        self._writer = writer
        self._reader = reader

    # -- receipts ------------------------------------------------------------------------

    def add(
        self,
        receipt: dict[str, Any],
        now: int,
        revokes: int | None = None,
        fence: tuple[str, str, int] | None = None,
    ) -> ReceiptRecord:
        """Store a signed receipt (one transaction); returns its row.

        ``fence`` is (chain or source name, owner, fencing token) of the lease the receipt
        is issued under: checked in the same transaction, exactly as a block write
        (:meth:`watcher.store.Store.block_txn`), so an instance that lost the lease stores
        nothing; the refusal raises :class:`StaleFencingToken` and is recorded in
        ``fencing_rejections``. None: unfenced (one instance alone, or a binding receipt,
        which any instance makes at registration)."""
        values = _values(receipt, now, revokes)
        try:
            with self._writer.begin() as conn:
                if fence is not None:
                    lease_store.check_fence(conn, *fence)
                (key,) = self._insert(conn, [values])
        except StaleFencingToken as exc:
            lease_store.record_rejection(self._writer, exc, now)
            raise
        return ReceiptRecord(id=key, **values)

    def add_many(
        self, receipts: Sequence[dict[str, Any]], now: int, fence: tuple[str, str, int] | None
    ) -> list[ReceiptRecord]:
        """Store several signed receipts in one transaction (the receipts of a block's
        settlements, built together), under ``fence`` as :meth:`add`: all or none."""
        rows = [_values(r, now, None) for r in receipts]
        if not rows:
            return []
        try:
            with self._writer.begin() as conn:
                if fence is not None:
                    lease_store.check_fence(conn, *fence)
                ids = self._insert(conn, rows)
        except StaleFencingToken as exc:
            lease_store.record_rejection(self._writer, exc, now)
            raise
        return [ReceiptRecord(id=i, **values) for i, values in zip(ids, rows, strict=True)]

    def _insert(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> list[int]:
        """Insert ``rows`` (one executemany), each body as its :func:`encoded` text;
        returns their ids in order."""
        names = ("settlement_id", "kind", "signer", "digest", "revokes", "created_at")
        statement = (
            insert(s.receipts)
            .values(
                {
                    **{name: bindparam("p_" + name) for name in names},
                    "body": body_value(self._writer.dialect),
                }
            )
            .returning(s.receipts.c.id, sort_by_parameter_order=True)
        )
        params = [
            {**{"p_" + name: row[name] for name in names}, BODY_PARAM: encoded(row["body"])}
            for row in rows
        ]
        return [int(i) for i in conn.execute(statement, params).scalars().all()]

    def settlements(self, ids: Sequence[str]) -> dict[str, SettlementRecord]:
        """The settlements of ``ids`` that exist, by id (one query per 500): what a batch of
        receipts is built from."""
        t = s.settlements
        out: dict[str, SettlementRecord] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            with self._reader.connect() as conn:
                rows = conn.execute(select(t).where(t.c.settlement_id.in_(chunk))).mappings()
                for row in rows:
                    out[row["settlement_id"]] = from_row(SettlementRecord, row)
        return out

    def for_settlement(self, settlement_id: str) -> list[ReceiptRecord]:
        """Every receipt of a settlement, revocations included, in order of issue."""
        return self.for_settlements([settlement_id]).get(settlement_id, [])

    def for_settlements(self, ids: Sequence[str]) -> dict[str, list[ReceiptRecord]]:
        """Receipts of several settlements (in order of issue), by settlement id."""
        r = s.receipts
        out: dict[str, list[ReceiptRecord]] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            with self._reader.connect() as conn:
                rows = (
                    conn.execute(select(r).where(r.c.settlement_id.in_(chunk)).order_by(r.c.id))
                    .mappings()
                    .all()
                )
            for row in rows:
                out.setdefault(row["settlement_id"], []).append(from_row(ReceiptRecord, row))
        return out

    def latest(
        self, settlement_id: str, kinds: Sequence[str] = DECISION_KINDS
    ) -> ReceiptRecord | None:
        """The newest receipt of one of ``kinds`` that no revocation withdraws."""
        current = [
            r for r in current_receipts(self.for_settlement(settlement_id)) if r.kind in kinds
        ]
        return current[-1] if current else None

    def latest_bytes(self, settlement_id: str) -> bytes | None:
        """The newest decision receipt no revocation withdraws, as the bytes the API answers
        (its stored text, not decoded: watcher/store/receipt_bytes.py); None if none."""
        with self._reader.connect() as conn:
            rows = conn.execute(_RECEIPTS_TEXT, {"settlement_id": settlement_id}).all()
        return _current_text(rows)

    def answer(self, settlement_id: str, owner: str) -> ReceiptAnswer:
        """``owner``'s settlement with its current decision receipt (None if none yet) as
        the bytes answered, in one statement; raises :class:`SettlementNotFound` for no
        such settlement of ``owner`` (another's is not revealed)."""
        params = {"settlement_id": settlement_id, "owner": owner}
        with self._reader.connect() as conn:
            rows = conn.execute(_ANSWER, params).all()
        return _answer_of(settlement_id, rows)

    async def answer_now(self, settlement_id: str, owner: str) -> ReceiptAnswer:
        """:meth:`answer` through the store's one raw read (watcher/store/fast_read.py:
        ``sqlite3`` or asynchronous ``psycopg``), awaited on the caller's event loop: what
        ``GET /v1/settlements/{id}/receipt`` reads, and re-reads while it waits, on either
        store, holding no worker thread."""
        params = {"settlement_id": settlement_id, "owner": owner}
        rows = await self._reader.fast_rows(_ANSWER, params)
        return _answer_of(settlement_id, [tuple(row.values()) for row in rows])

    def terminal_events(self, chain: str, after_id: int, limit: int = 1000) -> list[TerminalEvent]:
        """Events of ``chain`` after ``after_id`` that may call for a receipt, in order."""
        return events_store.terminal_events(self._reader, chain, TERMINAL_EVENTS, after_id, limit)

    def lifecycle(self, settlement_id: str) -> list[TerminalEvent]:
        """The verdict events of one settlement (:data:`TERMINAL_EVENTS` and
        ``late_finality``), oldest first: a source receipt's history."""
        return events_store.lifecycle(
            self._reader, settlement_id, (*TERMINAL_EVENTS, EventKind.LATE_FINALITY)
        )

    def last_event_id(self) -> int:
        """The newest event's id, 0 if none (a scan that found nothing can skip past it)."""
        return events_store.last_event_id(self._reader)

    # -- signers -------------------------------------------------------------------------

    def use_signer(self, address: str, source: str, now: int) -> None:
        """Record ``address`` as the current signer; retire every other one."""
        t = s.signers
        with self._writer.begin() as conn:
            row = conn.execute(select(t.c.address).where(t.c.address == address)).first()
            if row is None:
                conn.execute(insert(t).values(address=address, first_used_at=now, source=source))
            else:
                conn.execute(
                    update(t).where(t.c.address == address).values(retired_at=None, source=source)
                )
            conn.execute(
                update(t)
                .where(t.c.address != address, t.c.retired_at.is_(None))
                .values(retired_at=now)
            )

    def signers(self) -> list[SignerRecord]:
        """Every signer used, the current one first, then the most recently retired."""
        t = s.signers
        with self._reader.connect() as conn:
            rows = conn.execute(select(t)).mappings().all()
        records = [from_row(SignerRecord, r) for r in rows]
        return sorted(
            records, key=lambda r: (r.retired_at is not None, -(r.retired_at or 0), r.address)
        )


class _Dbs(Protocol):
    """What a receipt store is built over: the store's writer and reader."""

    @property
    def writer(self) -> Db: ...

    @property
    def reader(self) -> Db: ...


def _values(receipt: dict[str, Any], now: int, revokes: int | None) -> dict[str, Any]:
    """A receipt row's values (``body``: the document itself; stored as its text)."""
    return {
        "settlement_id": receipt["settlement_id"],
        "kind": receipt["kind"],
        "signer": receipt["signer"],
        "digest": receipt["digest"],
        "body": receipt,
        "revokes": revokes,
        "created_at": now,
    }


def receipt_store(store: _Dbs) -> ReceiptStore:
    """The receipts part of ``store`` (sharing its connections and their settings)."""
    return ReceiptStore(store.writer, store.reader)
