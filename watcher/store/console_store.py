"""The few reads the operator console needs that no other part makes: when each block of a
settlement's depth was made, and how long settlements took to become final.

Both are plain reads over the reader connection; nothing here writes.
"""

from __future__ import annotations

from sqlalchemy import func, select

from guard.settlement import Verdict
from watcher.store import schema as s
from watcher.store.db import Db

CONFIRMED = Verdict.FINALITY_CONFIRMED
"""The verdict whose time-to-final is measured."""


def header_times(reader: Db, chain: str, first: int, last: int) -> dict[int, int]:
    """Block timestamps (seconds, as the chain states them) of the stored headers
    ``first..last`` of ``chain``, by height; heights outside the window are absent."""
    h = s.headers
    query = select(h.c.number, h.c.timestamp).where(
        h.c.chain == chain, h.c.number >= first, h.c.number <= last
    )
    with reader.connect() as conn:
        return {int(r[0]): int(r[1]) for r in conn.execute(query).all()}


def final_durations(reader: Db, since_ms: int, owner: str) -> dict[str, list[int]]:
    """For each chain (or source), how long each of ``owner``'s settlements confirmed at or
    after ``since_ms`` took from registration to its final verdict (ms), ascending."""
    t = s.settlements
    query = (
        select(t.c.chain, t.c.terminal_at - t.c.initiated_at)
        .where(t.c.owner == owner, t.c.verdict == CONFIRMED, t.c.terminal_at >= since_ms)
        .order_by(t.c.chain, t.c.terminal_at - t.c.initiated_at)
    )
    out: dict[str, list[int]] = {}
    with reader.connect() as conn:
        for chain, took in conn.execute(query).all():
            out.setdefault(str(chain), []).append(max(0, int(took)))
    return out


def last_event_id(reader: Db) -> int:
    """The id of the newest stored event (0 when there is none): where a live view that
    wants only what happens from now on starts its stream."""
    t = s.events
    with reader.connect() as conn:
        found = conn.execute(select(func.max(t.c.id))).scalar()
    return int(found or 0)
