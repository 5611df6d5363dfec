"""Reorg and alert/lifecycle events as stored (the ``reorgs`` and ``events`` tables).

Every statement over the ``events`` table is here: the insert a block's transaction makes
(:func:`insert_event`, through :class:`~watcher.store.block_txn.BlockTxn`), and the reads of
the API and CLI (:class:`EventQueries`), of the outbox (:func:`event_at`) and of the
receipts scan (:func:`terminal_events`, :func:`lifecycle`, :func:`last_event_id`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import bindparam, func, insert, or_, select
from sqlalchemy.engine import Connection

from watcher.store import poll_queries as pq
from watcher.store import schema as s
from watcher.store.db import Db
from watcher.store.driver_sql import insert_many, statement
from watcher.store.records import EventRecord, ReorgRecord, from_row
from watcher.store.settlements_store import owned_ids, owned_rows


class EventQueries:
    """Reads of reorgs and events; part of :class:`~watcher.store.store.Store`."""

    _writer: Db
    _reader: Db

    def reorgs(
        self, chain: str | None = None, limit: int = 100, *, owner: str | None = None
    ) -> list[ReorgRecord]:
        """Most recent reorgs first; for ``owner``, each one's ``touched`` lists only its
        settlements (a reorg is chain-wide: every caller sees it happened)."""
        t = s.reorgs
        query = select(t).order_by(t.c.id.desc()).limit(limit)
        if chain is not None:
            query = query.where(t.c.chain == chain)
        with self._reader.connect() as conn:
            rows = conn.execute(query).mappings().all()
        found = [from_row(ReorgRecord, r) for r in rows]
        if owner is None:
            return found
        mine = owned_ids(self._reader, (i for r in found for i in r.touched), owner)
        return [replace(r, touched=[i for i in r.touched if i in mine]) for r in found]

    def events(
        self,
        settlement_id: str | None = None,
        after_id: int = 0,
        limit: int = 1000,
        *,
        owner: str | None = None,
    ) -> list[EventRecord]:
        """Events in order, optionally for one settlement; for ``owner``, only the events
        of its settlements and the chain-wide ones (see :meth:`visible_to`)."""
        t = s.events
        query = select(t).where(t.c.id > after_id).order_by(t.c.id).limit(limit)
        if settlement_id is not None:
            query = query.where(t.c.settlement_id == settlement_id)
        if owner is not None:
            theirs = select(s.settlements.c.settlement_id).where(s.settlements.c.owner == owner)
            flows = select(s.workflows.c.workflow_id).where(s.workflows.c.owner == owner)
            query = query.where(
                or_(
                    t.c.settlement_id.is_(None),
                    t.c.settlement_id.in_(theirs),
                    t.c.settlement_id.in_(flows),
                )
            )
        with self._reader.connect() as conn:
            rows = conn.execute(query).mappings().all()
        found = [from_row(EventRecord, r) for r in rows]
        return found if owner is None else self.visible_to(found, owner)

    def visible_to(self, events: Sequence[EventRecord], owner: str) -> list[EventRecord]:
        """What ``owner`` may see of ``events``: the events of its own settlements, and the
        chain-wide ones (reorgs, endpoint health) with their ``touched`` list cut to its own
        settlements; another caller's settlement is never named."""
        named = {e.settlement_id for e in events if e.settlement_id is not None}
        named.update(i for e in events for i in _touched(e))
        mine = owned_ids(self._reader, named, owner) if named else set()
        mine |= owned_workflows(self._reader, named, owner) if named else set()
        shown: list[EventRecord] = []
        for event in events:
            if event.settlement_id is not None and event.settlement_id not in mine:
                continue
            if "touched" in event.payload:
                touched = [i for i in _touched(event) if i in mine]
                event = replace(event, payload={**event.payload, "touched": touched})
            shown.append(event)
        return shown


def owned_workflows(db: Db, ids: set[str], owner: str) -> set[str]:
    """Those of ``ids`` that are ``owner``'s workflows (a workflow's event names it in its
    ``settlement_id``: another caller never sees it)."""
    return owned_rows(db, s.workflows.c.workflow_id, s.workflows.c.owner, ids, owner)


def _touched(event: EventRecord) -> list[str]:
    """The settlement ids a chain-wide event's payload lists (a reorg's ``touched``)."""
    touched = event.payload.get("touched")
    return [str(i) for i in touched] if isinstance(touched, list) else []


@dataclass(frozen=True)
class TerminalEvent:
    """An event after which a receipt (or a revocation) may be due."""

    id: int
    """Event id (the scan's cursor)."""
    settlement_id: str
    """Settlement concerned."""
    kind: str
    """The event's kind (a verdict event)."""
    payload: dict[str, Any]
    """The event's payload."""
    created_at: int = 0
    """When it was recorded (ms; filled by :func:`lifecycle`)."""


_EVENT_COLUMNS = ("chain", "settlement_id", "kind", "severity", "payload", "created_at")


def _insert_event() -> Any:
    """An event's insert returning its id, its values bound parameters (compiled once:
    watcher/store/driver_sql.py)."""
    values = {c: bindparam(c, type_=s.events.c[c].type) for c in _EVENT_COLUMNS}
    return insert(s.events).values(values).returning(s.events.c.id)


def insert_event(
    conn: Connection,
    chain: str,
    kind: str,
    severity: str,
    payload: dict[str, Any],
    settlement_id: str | None,
    now: int,
) -> int:
    """Insert one event in the caller's transaction; returns its id. On the driver's
    cursor (as a block's settlement writes): a catch-up records an event per decision, and
    SQLAlchemy's per-statement work cost several times SQLite's insert."""
    values = {
        "chain": chain,
        "settlement_id": settlement_id,
        "kind": kind,
        "severity": severity,
        "payload": payload,
        "created_at": now,
    }
    cursor = statement(conn, "insert_event", _insert_event).run(conn, values)
    try:
        row = cursor.fetchone()
    finally:
        cursor.close()
    assert row is not None
    return int(row[0])


_INSERT_EVENTS = insert(s.events).returning(s.events.c.id, sort_by_parameter_order=True)
"""Many events in one statement, their ids returned in the order given."""


def insert_events(
    conn: Connection,
    chain: str,
    events: Sequence[tuple[str, str, dict[str, Any], str | None]],
    now: int,
    returning: bool = True,
) -> list[int]:
    """Insert ``events`` ((kind, severity, payload, settlement id) each) in the caller's
    transaction in one statement; returns their ids in the same order, or nothing without
    ``returning`` (when no delivery refers to them: a plain executemany is cheaper than
    SQLAlchemy's many-values insert with RETURNING). A block of 1,000 deposits records
    1,000 ``deposit_seen``: one statement for all of them, not one each."""
    if not events:
        return []
    rows = [
        {
            "chain": chain,
            "settlement_id": sid,
            "kind": kind,
            "severity": severity,
            "payload": payload,
            "created_at": now,
        }
        for kind, severity, payload, sid in events
    ]
    if not returning:  # one executemany on the driver's cursor (watcher/store/driver_sql.py)
        insert_many(conn, s.events, rows)
        return []
    return [int(r[0]) for r in conn.execute(_INSERT_EVENTS, rows).all()]


def event_at(db: Db, event_id: int) -> tuple[dict[str, Any], int] | None:
    """(payload, created_at) of one stored event, None if there is no such event."""
    e = s.events
    with db.connect() as conn:
        row = conn.execute(select(e.c.payload, e.c.created_at).where(e.c.id == event_id)).first()
    return None if row is None else (dict(row[0]), int(row[1]))


def last_event_id(db: Db) -> int:
    """The newest event's id (0 when there is none)."""
    with db.connect() as conn:
        value = conn.execute(select(func.max(s.events.c.id))).scalar()
    return 0 if value is None else int(value)


def terminal_events(
    db: Db, chain: str, kinds: Sequence[str], after_id: int, limit: int
) -> list[TerminalEvent]:
    """Events of ``chain`` of ``kinds`` about a settlement, after ``after_id``, in order."""
    params = {"q_chain": chain, "q_id": after_id, "q_limit": limit}
    with db.connect() as conn:
        rows = conn.execute(pq.terminal_events(tuple(kinds)), params).all()
    return [TerminalEvent(int(r[0]), str(r[1]), str(r[2]), dict(r[3])) for r in rows]


def lifecycle(db: Db, settlement_id: str, kinds: Sequence[str]) -> list[TerminalEvent]:
    """The events of ``kinds`` of one settlement, with their time, oldest first."""
    e = s.events
    with db.connect() as conn:
        rows = conn.execute(
            select(e.c.id, e.c.settlement_id, e.c.kind, e.c.payload, e.c.created_at)
            .where(e.c.settlement_id == settlement_id, e.c.kind.in_(list(kinds)))
            .order_by(e.c.id)
        ).all()
    return [TerminalEvent(int(r[0]), str(r[1]), str(r[2]), dict(r[3]), int(r[4])) for r in rows]
