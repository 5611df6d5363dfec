"""Callers' workflows as stored: one row each, its steps and its lease in the same row.

The lease (holder, fencing token, expiry) lives in the store, not in one process's memory,
so any daemon instance over the same database answers any request. Every write goes
through :meth:`WorkflowStore.locked`: one transaction holding the workflow's row
(``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite's writers are serialised by ``BEGIN
IMMEDIATE``), so a check of the fencing token and the change it guards commit together,
and a takeover never interleaves with a write of the predecessor. Events (and the alert
deliveries they call for) are written in that same transaction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.engine import Connection, Dialect

from watcher.store import schema as s
from watcher.store.block_txn import BlockTxn
from watcher.store.db import Db
from watcher.store.driver_sql import DriverStatement
from watcher.store.errors import StoreConflict
from watcher.store.records import from_row

WORKFLOW_ID_PREFIX = "wf_"
"""How every workflow id begins."""
EVENTS_CHAIN = "workflows"
"""The ``chain`` column of a workflow's events (they belong to no chain)."""


@dataclass(frozen=True)
class WorkflowRecord:
    """One stored workflow."""

    seq: int
    """Insertion order (the listing's cursor)."""
    workflow_id: str
    """``wf_`` and random hex."""
    owner: str
    """The API caller whose token created it."""
    reference: str | None
    """The caller's idempotency reference (an order id), if given."""
    holder: str
    """Who holds (or last held) the lease."""
    token: int
    """The current fencing token: 1 at creation, one more at every takeover."""
    acquired_at: int
    """When the current holder took the lease (ms)."""
    lease_expires_at: int
    """When the lease lapses unless renewed (ms); 0 once released."""
    lease_ms: int
    """The lease's length: a renewal extends it by this much from now."""
    expiry_noted: bool
    """Whether ``workflow_lease_expired`` was recorded for the current lease."""
    steps: list[dict[str, Any]]
    """The steps in order: name, state, operation, recovery, side effects."""
    idempotent_steps: list[str]
    """Steps whose re-run has no extra effect (the caller's declaration)."""
    checkpoint_digest: str
    """Digest of ``steps`` as the last write recorded them (the checkpoint)."""
    handoff: dict[str, Any]
    """The last lock change: verdict, directive, recovery and the four signed receipts."""
    created_at: int
    """Creation (ms)."""
    updated_at: int
    """Last write (ms)."""


_BY_ID = select(s.workflows).where(
    s.workflows.c.workflow_id == bindparam("b_id"), s.workflows.c.owner == bindparam("b_owner")
)
"""One caller's workflow by id, built once (every request reads one)."""
_LOCKED_PG = _BY_ID.with_for_update()
"""The same, holding the row until the transaction ends (PostgreSQL)."""


def _update_of(columns: tuple[str, ...]) -> Any:
    """The update of a workflow's ``columns`` (and ``updated_at``) as bound parameters
    ``b_<column>`` of the columns' own types."""
    t = s.workflows
    values = {c: bindparam("b_" + c, type_=t.c[c].type) for c in columns}
    return (
        update(t)
        .where(t.c.workflow_id == bindparam("b_id"))
        .values({**values, "updated_at": bindparam("b_now")})
    )


def _event_insert(postgresql: bool) -> Any:
    """A workflow event's insert (its id: RETURNING on PostgreSQL, the row id on SQLite)."""
    e = s.events
    columns = ("chain", "settlement_id", "kind", "severity", "payload", "created_at")
    statement = insert(e).values({c: bindparam(c, type_=e.c[c].type) for c in columns})
    return statement.returning(e.c.id) if postgresql else statement


class _Statements:
    """A write transaction's statements, compiled once for the store's dialect and run on
    the driver's cursor (watcher/store/driver_sql.py): a step write runs three, in a group
    of many, on the one thread that writes."""

    def __init__(self, dialect: Dialect) -> None:
        self.postgresql = dialect.name == "postgresql"
        self.dialect = dialect
        self.locked = DriverStatement(_LOCKED_PG if self.postgresql else _BY_ID, dialect)
        self.event = DriverStatement(_event_insert(self.postgresql), dialect)
        self._updates: dict[tuple[str, ...], DriverStatement] = {}

    def update(self, columns: tuple[str, ...]) -> DriverStatement:
        """The update of ``columns`` (compiled at its first use)."""
        found = self._updates.get(columns)
        if found is None:
            found = self._updates[columns] = DriverStatement(_update_of(columns), self.dialect)
        return found

    def row(self, conn: Connection, workflow_id: str, owner: str) -> WorkflowRecord | None:
        """``owner``'s workflow, its row held until the transaction ends."""
        row = self.locked.first(conn, {"b_id": workflow_id, "b_owner": owner})
        return None if row is None else _record(row)


class WorkflowTxn:
    """The writes of one workflow request, inside the transaction holding its row."""

    def __init__(
        self, conn: Connection, statements: _Statements, record: WorkflowRecord | None, now: int
    ) -> None:
        self.record = record
        """The workflow as locked (None: no such workflow of this caller)."""
        self.events = BlockTxn(conn, EVENTS_CHAIN, now)
        """Where its alert deliveries are written (:meth:`record_event` records events)."""
        self.now = now
        """The request's instant (every change's ``updated_at``)."""
        self._conn = conn
        self._statements = statements

    def update(self, **values: Any) -> None:
        """Change the locked workflow's row."""
        assert self.record is not None
        params = {"b_" + k: v for k, v in values.items()}
        statement = self._statements.update(tuple(sorted(values)))
        params["b_id"], params["b_now"] = self.record.workflow_id, self.now
        statement.run(self._conn, params).close()

    def record_event(self, kind: str, severity: str, payload: dict[str, Any]) -> int:
        """Record an event of the locked workflow (its id in the ``settlement_id`` column, as
        a settlement's events carry theirs); returns the event's id."""
        assert self.record is not None
        values = {
            "chain": EVENTS_CHAIN,
            "settlement_id": self.record.workflow_id,
            "kind": str(kind),
            "severity": severity,
            "payload": payload,
            "created_at": self.now,
        }
        cursor = self._statements.event.run(self._conn, values)
        try:
            if self._statements.postgresql:
                return int(cursor.fetchone()[0])
            return int(cursor.lastrowid)
        finally:
            cursor.close()


class WorkflowGroup:
    """The transaction of a group of workflow writes (:meth:`WorkflowStore.group`)."""

    def __init__(self, conn: Connection, statements: _Statements) -> None:
        self._conn = conn
        self._statements = statements

    def locked(self, workflow_id: str, owner: str, now: int) -> WorkflowTxn:
        """``owner``'s workflow row, held until the group's transaction ends, as it stands
        after the group's earlier writes."""
        rec = self._statements.row(self._conn, workflow_id, owner)
        return WorkflowTxn(self._conn, self._statements, rec, now)


class WorkflowStore:
    """Workflows over the store's connections."""

    def __init__(self, writer: Db, reader: Db) -> None:
        self._writer = writer
        self._reader = reader
        self._statements = _Statements(writer.dialect)

    @property
    def side_by_side(self) -> bool:
        """Whether write transactions run side by side (PostgreSQL; SQLite has one writer
        at a time)."""
        return bool(self._writer.dialect.name == "postgresql")

    def create(self, values: Mapping[str, Any]) -> tuple[WorkflowRecord, bool]:
        """Insert a workflow (``values``: every column but ``seq``); (record, True). A
        workflow of the same owner and reference exists: (that one, False)."""
        existing = self._by_reference(values)
        if existing is not None:
            return existing, False
        try:
            with self._writer.begin() as conn:
                conn.execute(insert(s.workflows).values(**values))
        except StoreConflict:
            raced = self._by_reference(values)  # created by a concurrent request
            if raced is None:
                raise
            return raced, False
        found = self.get(str(values["workflow_id"]), str(values["owner"]))
        assert found is not None
        return found, True

    def _by_reference(self, values: Mapping[str, Any]) -> WorkflowRecord | None:
        if values.get("reference") is None:
            return None
        t = s.workflows
        query = select(t).where(t.c.owner == values["owner"], t.c.reference == values["reference"])
        with self._reader.connect() as conn:
            row = conn.execute(query).mappings().first()
        return None if row is None else _record(row)

    def get(self, workflow_id: str, owner: str) -> WorkflowRecord | None:
        """``owner``'s workflow (None for an unknown id or another caller's)."""
        with self._reader.connect() as conn:
            row = conn.execute(_BY_ID, {"b_id": workflow_id, "b_owner": owner}).mappings().first()
        return None if row is None else _record(row)

    def page(self, owner: str, after_seq: int, limit: int) -> list[WorkflowRecord]:
        """``owner``'s workflows after ``after_seq``, oldest first."""
        t = s.workflows
        query = (
            select(t).where(t.c.owner == owner, t.c.seq > after_seq).order_by(t.c.seq).limit(limit)
        )
        with self._reader.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [_record(r) for r in rows]

    @contextlib.contextmanager
    def locked(self, workflow_id: str, owner: str, now: int) -> Iterator[WorkflowTxn]:
        """One write transaction holding ``owner``'s workflow row: committed on exit, rolled
        back (nothing changed) when the body raises."""
        with self._writer.begin() as conn:
            rec = self._statements.row(conn, workflow_id, owner)
            yield WorkflowTxn(conn, self._statements, rec, now)

    @contextlib.contextmanager
    def group(self) -> Iterator[WorkflowGroup]:
        """One write transaction for several workflow writes (a group commit): each locks
        its row through :meth:`WorkflowGroup.locked` and sees the writes made before it;
        committed on exit, all rolled back when the body raises."""
        with self._writer.begin() as conn:
            yield WorkflowGroup(conn, self._statements)

    def lapsed(self, now: int, limit: int = 100) -> list[tuple[str, str]]:
        """(workflow id, owner) of leases that lapsed (not released) and were not yet noted."""
        t = s.workflows
        query = (
            select(t.c.workflow_id, t.c.owner)
            .where(
                t.c.expiry_noted.is_(False),
                t.c.lease_expires_at > 0,
                t.c.lease_expires_at <= now,
            )
            .limit(limit)
        )
        with self._reader.connect() as conn:
            return [(str(r[0]), str(r[1])) for r in conn.execute(query).all()]


def _record(row: Any) -> WorkflowRecord:
    return from_row(WorkflowRecord, row)
