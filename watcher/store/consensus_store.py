"""The light client's committee chain, kept: what a restarted daemon does not ask again.

A chain with ``beacon_api`` verifies a bootstrap at its checkpoint and one committee
hand-over per period (watcher/receipts/consensus.py). Those answers never change (a past
period's hand-over is final), so once verified they are stored here, per chain and
checkpoint, and read back at start: the Beacon API is asked for each at most once, ever.
What is read back is verified again with the next finality update before any receipt uses
it, so a row can delay a receipt, never make a wrong one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from sqlalchemy import delete, insert, select

from watcher.store import schema as s
from watcher.store.db import Db
from watcher.store.json_text import json_text


class _Dbs(Protocol):
    @property
    def writer(self) -> Db: ...

    @property
    def reader(self) -> Db: ...


class ConsensusStore:
    """Reads and writes ``consensus_data`` rows."""

    def __init__(self, writer: Db, reader: Db) -> None:
        self._writer = writer
        self._reader = reader

    def load(self, chain: str, checkpoint: str) -> tuple[Any, list[Any]]:
        """(the bootstrap or None, the hand-overs in period order from the bootstrap's,
        contiguous) stored for ``chain`` from ``checkpoint``."""
        t = s.consensus_data
        with self._reader.connect() as conn:
            rows = conn.execute(
                select(t.c.period, t.c.bootstrap, t.c.update_answer)
                .where(t.c.chain == chain, t.c.checkpoint == checkpoint)
                .order_by(t.c.period)
            ).all()
        if not rows or rows[0].bootstrap is None:
            return None, []
        updates: list[Any] = []
        for expected, row in enumerate(rows[1:], start=rows[0].period + 1):
            if row.period != expected or row.update_answer is None:
                break
            updates.append(json.loads(row.update_answer))
        return json.loads(rows[0].bootstrap), updates

    def save(
        self, chain: str, checkpoint: str, period: int, bootstrap: Any, updates: Sequence[Any]
    ) -> None:
        """Store the verified ``bootstrap`` of ``period`` and the ``updates`` of the periods
        after it (replacing what was stored for this chain and checkpoint)."""
        t = s.consensus_data
        rows = [{"period": period, "bootstrap": json_text(bootstrap), "update_answer": None}]
        rows += [
            {"period": period + 1 + i, "bootstrap": None, "update_answer": json_text(update)}
            for i, update in enumerate(updates)
        ]
        with self._writer.begin() as conn:
            conn.execute(delete(t).where(t.c.chain == chain, t.c.checkpoint == checkpoint))
            conn.execute(insert(t), [{"chain": chain, "checkpoint": checkpoint, **r} for r in rows])


def consensus_store(store: _Dbs) -> ConsensusStore:
    """The consensus part of ``store`` (sharing its connections)."""
    return ConsensusStore(store.writer, store.reader)
