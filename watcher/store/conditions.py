"""SQL conditions over settlements that several store modules share (one definition each,
so the query that picks settlements for a block and the one that says "anything due?"
cannot drift apart)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, or_

from guard.settlement import Verdict
from watcher.store import schema as s


def deadline_reasons(now: int, late_watch_ms: int) -> list[Any]:
    """A time-only change is due: the deadline passed while awaiting, or the late-finality
    watch of a timed-out settlement ended (the SQL side of :func:`guard.late_watch.still_watched`)."""
    return deadline_reasons_at(now, now - late_watch_ms)


def deadline_reasons_at(now: Any, cut: Any) -> list[Any]:
    """:func:`deadline_reasons` with ``cut`` (now - the late watch) given: values, or the
    bound parameters of a statement built once (watcher/store/block_queries.py)."""
    t = s.settlements
    return [
        and_(t.c.verdict == Verdict.AWAITING_FINALITY, t.c.deadline <= now),
        and_(t.c.verdict == Verdict.TIMEOUT_TREATED_AS_FAILURE, t.c.deadline <= cut),
    ]


def finality_reasons(head: Any, finalized: Any | None) -> list[Any]:
    """Depth reached at ``head``, or (for the modes that use it) the anchor is at or below
    the chain's ``finalized`` block."""
    t = s.settlements
    reasons: list[Any] = [t.c.confirm_height <= head]
    if finalized is not None:
        reasons.append(
            and_(
                t.c.finality_mode != "depth",
                or_(t.c.block_number <= finalized, t.c.replaced_block_number <= finalized),
            )
        )
    return reasons
