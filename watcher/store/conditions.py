"""SQL conditions over settlements that several store modules share (one definition each,
so the query that picks settlements for a block and the one that says "anything due?"
cannot drift apart)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import CompoundSelect, and_, literal, or_, select, union

from guard.finality_rule import BASES_OF_MODE
from guard.settlement import Verdict
from watcher.store import schema as s

_BY_DEPTH = tuple(m for m, bases in BASES_OF_MODE.items() if "depth" in bases)
_BY_FINALIZED = tuple(m for m, bases in BASES_OF_MODE.items() if "finalized" in bases)
_BY_SAFE = tuple(m for m, bases in BASES_OF_MODE.items() if "safe" in bases)
_BY_BOTH = tuple(m for m, bases in BASES_OF_MODE.items() if "depth_and_finalized" in bases)
DEPTH_RULES = frozenset(_BY_DEPTH + _BY_BOTH)
"""The rules a block can reach only by its depth among others: a deposit under one of them
has a ``confirm_height`` (watcher/store/deposits_store.py ``deposit_row``)."""


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


def rule_reached(
    block: Any, required: Any, mode: Any, head: Any, finalized: Any | None, safe: Any | None
) -> Any:
    """A block (``block``: a column) is final under its settlement's rule (``mode``,
    ``required`` confirmations) at ``head`` and the chain's ``finalized``/``safe`` heights:
    the SQL side of :func:`guard.finality_rule.finality_basis` being some basis, asked of
    each mode as the guard asks it (values, or the bound parameters of a statement built
    once).

    Why exactly the rule, not "deep enough, or at or below some tag" for every mode: a
    deposit awaiting the ``finalized`` tag is three blocks deep long before it is final,
    and every one of them was decided again at every block until then (on Ethereum, 64
    blocks of deposits a block)."""

    def one_of(modes: tuple[str, ...]) -> Any:
        # Literal values, not an expanding list: the driver's cursor runs such statements.
        return mode.in_([literal(m, mode.type) for m in modes])

    deep = block + required - 1 <= head
    reached = [and_(one_of(_BY_DEPTH), deep)]
    if finalized is not None:
        reached.append(and_(one_of(_BY_FINALIZED), block <= finalized))
        reached.append(and_(one_of(_BY_BOTH), deep, block <= finalized))
    if safe is not None:
        reached.append(and_(one_of(_BY_SAFE), block <= safe))
    return or_(*reached)


def deposit_key_ranges(head: Any, finalized: Any | None, safe: Any | None) -> list[Any]:
    """The index ranges that hold every watched deposit whose rule may be reached at
    ``head`` and the ``finalized``/``safe`` heights: deep enough by its ``confirm_height``
    (kept for a rule with a depth basis), or at or below a tag by its ``transfer_block``
    (values, or bound parameters). A superset (its keys are never above its counted
    transfers: watcher/store/deposits_store.py ``lower_deposit_blocks``); each read asks
    the exact rule of the transfers themselves (:func:`rule_reached`)."""
    t = s.settlements
    ranges = [t.c.confirm_height <= head]
    ranges += [t.c.transfer_block <= tag for tag in (finalized, safe) if tag is not None]
    return ranges


def watched_in(chain: Any, ranges: Sequence[Any]) -> CompoundSelect[tuple[int]]:
    """The sequences of ``chain``'s watched settlements that fall in any of ``ranges``, each
    range read through an index of its own: a union, not the ranges or'ed (SQLite then
    walked every watched row of the chain). The chain and ``watching`` are asked here only:
    a query on ``seq IN`` this reads the rows it names, not the watched ones."""
    t = s.settlements
    watched = t.c.watching.is_(True)
    return union(*(select(t.c.seq).where(t.c.chain == chain, watched, r) for r in ranges))
