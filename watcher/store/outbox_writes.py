"""Outbox writes made inside a caller's transaction (the engine's block transaction), so a
delivery row is stored with the verdict or alert it reports, or not at all."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import null, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from watcher.store import schema as s
from watcher.store.db import note_outbox_changed
from watcher.store.errors import StoreError
from watcher.store.outbox_states import (
    CANCELLED,
    COMMIT_CHANNEL,
    DEAD,
    DELIVERED,
    PENDING,
    SENDING,
    NewDelivery,
)


def sql_body(body: dict[str, Any] | None) -> Any:
    """SQL NULL for "no body yet" (the JSON type would store None as the JSON text null,
    which ``IS NULL`` does not match)."""
    return null() if body is None else body


def enqueue(conn: Connection, new: NewDelivery, now: int) -> bool:
    """Insert ``new`` unless its idempotency key exists; True if a row was written.

    A ``cancelled`` row with the same key is revived instead (a settlement confirmed again
    after a reorg took its first confirmation away): same key, body re-assembled.
    """
    values = {
        "settlement_id": new.settlement_id,
        "event_id": new.event_id,
        "channel": new.channel,
        "kind": new.kind,
        "url": new.url,
        "idempotency_key": new.idempotency_key,
        "state": PENDING,
        "attempts": 0,
        "next_attempt_at": now,
        "body": sql_body(new.body),
        "created_at": now,
        "updated_at": now,
    }
    dialect = conn.dialect.name
    stmt: Any
    if dialect == "postgresql":
        stmt = pg_insert(s.deliveries).values(**values).on_conflict_do_nothing()
    elif dialect == "sqlite":
        stmt = sqlite_insert(s.deliveries).values(**values).on_conflict_do_nothing()
    else:  # pragma: no cover - only the two backends are supported
        raise StoreError(f"outbox: unsupported database {dialect!r}")
    # RETURNING, not rowcount: drivers disagree on rowcount for ON CONFLICT DO NOTHING.
    if conn.execute(stmt.returning(s.deliveries.c.id)).first() is not None:
        note_outbox_changed(conn)
        return True
    d = s.deliveries
    revived = conn.execute(
        update(d)
        .where(d.c.idempotency_key == new.idempotency_key, d.c.state == CANCELLED)
        .values(
            state=PENDING,
            attempts=0,
            next_attempt_at=now,
            body=sql_body(new.body),
            event_id=new.event_id,
            last_error=None,
            last_status=None,
            updated_at=now,
        )
    )
    if revived.rowcount:
        note_outbox_changed(conn)
    return bool(revived.rowcount)


def cancel_undelivered(
    conn: Connection, settlement_id: str, kinds: Sequence[str], now: int, reason: str
) -> int:
    """Cancel the settlement's not yet delivered commit-channel rows of ``kinds``."""
    d = s.deliveries
    result = conn.execute(
        update(d)
        .where(
            d.c.settlement_id == settlement_id,
            d.c.channel == COMMIT_CHANNEL,
            d.c.kind.in_(list(kinds)),
            d.c.state.in_([PENDING, SENDING]),
        )
        .values(state=CANCELLED, last_error=reason, updated_at=now)
    )
    if result.rowcount:
        note_outbox_changed(conn)
    return int(result.rowcount)


def retire_commit(conn: Connection, key: str, archive_as: str, now: int, reason: str) -> str | None:
    """A finality violation took the ground from under the commit row ``key``: the state it
    was in (None: no such row).

    Not sent yet (``pending``, or ``dead`` awaiting a replay): cancelled, keeping its key, so
    a new confirmation revives it. Sent or being sent (``sending``, ``delivered``): renamed
    to ``archive_as`` and otherwise left alone (an attempt in flight still records its
    outcome, and holds back the settlement's newer rows until it does), which frees ``key``
    for the commit of a new confirmation: a new row, ordered after the violation."""
    d = s.deliveries
    row = conn.execute(select(d.c.id, d.c.state).where(d.c.idempotency_key == key)).first()
    if row is None:
        return None
    state = str(row[1])
    if state in (PENDING, DEAD):
        values: dict[str, Any] = {"state": CANCELLED, "last_error": reason}
    elif state in (SENDING, DELIVERED):
        values = {"idempotency_key": archive_as}
    else:
        return state
    conn.execute(update(d).where(d.c.id == row[0]).values(updated_at=now, **values))
    note_outbox_changed(conn)
    return state
