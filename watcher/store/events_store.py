"""Reorg and alert/lifecycle events as stored (the ``reorgs`` and ``events`` tables).

They are written inside a block's transaction (:class:`~watcher.store.block_txn.BlockTxn`);
this module reads them back for the API, the CLI and the delivery planner.
"""

from __future__ import annotations

from sqlalchemy import select

from watcher.store import schema as s
from watcher.store.db import Db
from watcher.store.records import EventRecord, ReorgRecord, from_row


class EventQueries:
    """Reads of reorgs and events; part of :class:`~watcher.store.store.Store`."""

    _writer: Db
    _reader: Db

    def reorgs(self, chain: str | None = None, limit: int = 100) -> list[ReorgRecord]:
        """Most recent reorgs first."""
        t = s.reorgs
        query = select(t).order_by(t.c.id.desc()).limit(limit)
        if chain is not None:
            query = query.where(t.c.chain == chain)
        with self._reader.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [from_row(ReorgRecord, r) for r in rows]

    def events(
        self, settlement_id: str | None = None, after_id: int = 0, limit: int = 1000
    ) -> list[EventRecord]:
        """Events in order, optionally for one settlement."""
        t = s.events
        query = select(t).where(t.c.id > after_id).order_by(t.c.id).limit(limit)
        if settlement_id is not None:
            query = query.where(t.c.settlement_id == settlement_id)
        with self._reader.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [from_row(EventRecord, r) for r in rows]
