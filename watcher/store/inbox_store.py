"""The webhook inbox (the ``webhook_inbox`` table): signed events kept until applied.

Any instance stores a verified webhook event here, unfenced (storing decides nothing); the
source's lease owner applies the pending ones and marks each applied under its fencing
token, so an event received by a standby is never lost and never applied by a stale owner.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select, update

from watcher.store import lease_store
from watcher.store import schema as s
from watcher.store.db import Db
from watcher.store.errors import StaleFencingToken, StoreConflict
from watcher.store.records import InboxRecord, from_row


class Inbox:
    """The inbox over the store's connections (``Store.inbox()``)."""

    def __init__(self, writer: Db, reader: Db) -> None:
        self._writer = writer
        self._reader = reader

    def add(
        self,
        source: str,
        ref: str,
        event_id: str,
        event: dict[str, Any],
        received_by: str,
        received_at: int,
    ) -> bool:
        """Store a verified event; False (and nothing written) when the inbox holds that
        event of ``source`` already (the sender redelivered it)."""
        values = {
            "source": source,
            "ref": ref,
            "event_id": event_id,
            "event": event,
            "received_by": received_by,
            "received_at": received_at,
        }
        try:
            with self._writer.begin() as conn:
                conn.execute(insert(s.webhook_inbox).values(**values))
        except StoreConflict:
            return False
        return True

    def pending(self, source: str, limit: int) -> list[InboxRecord]:
        """Up to ``limit`` events of ``source`` not applied yet, oldest first."""
        w = s.webhook_inbox
        with self._reader.connect() as conn:
            rows = (
                conn.execute(
                    select(w)
                    .where(w.c.source == source, w.c.applied_at.is_(None))
                    .order_by(w.c.id)
                    .limit(limit)
                )
                .mappings()
                .all()
            )
        return [from_row(InboxRecord, r) for r in rows]

    def mark_applied(
        self, source: str, row_id: int, now: int, by: str, fence: tuple[str, int] | None
    ) -> None:
        """Mark one event applied, under the source's ``fence`` (owner, token): a stale
        owner changes nothing, its refusal is recorded and :class:`StaleFencingToken` raised."""
        w = s.webhook_inbox
        try:
            with self._writer.begin() as conn:
                if fence is not None:
                    lease_store.check_fence(conn, source, fence[0], fence[1])
                conn.execute(
                    update(w)
                    .where(w.c.id == row_id, w.c.applied_at.is_(None))
                    .values(
                        applied_at=now,
                        applied_by=by,
                        applied_token=None if fence is None else fence[1],
                    )
                )
        except StaleFencingToken as exc:
            lease_store.record_rejection(self._writer, exc, now)
            raise
