"""Tail the event log in id order without skipping an event that committed late.

PostgreSQL hands out an id when a row is inserted, not when its transaction commits. Two
instances (or a chain's block transaction and a gate alert) can insert ids 11 and 12, and 12
can become visible first. A reader that moved its cursor to 12 would never see 11: the SSE
stream and the log channel would silently lose an alert — a ``finality_violation`` could be
the one.

:class:`EventTail` holds a gap open instead: events after a missing id are held back until
the missing one appears or ``gap_wait_s`` has passed since the gap was first seen (a rolled
back transaction leaves a gap that never fills; waiting for ever would stop the stream). On
SQLite (one writer, ids in commit order) gaps do not occur and nothing is held back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

GAP_WAIT_S = 2.0
"""How long a missing id holds back the events after it. Longer than any block transaction
takes to commit after inserting its events; an alert may arrive this much later, never lost."""


class HasId(Protocol):
    """Anything with an integer id in insertion order (an event record)."""

    @property
    def id(self) -> int: ...


E = TypeVar("E", bound=HasId)


class EventTail(Generic[E]):
    """A cursor over ids that only moves past a gap once the gap is old enough."""

    def __init__(
        self,
        after: int,
        gap_wait_s: float = GAP_WAIT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.last = after
        """The highest id handed out; the next read asks for ids above it."""
        self.gap_wait_s = gap_wait_s
        self._clock = clock
        self._gap_seen: tuple[int, float] | None = None
        """The missing id holding the tail back, and when it was first seen missing."""

    def take(self, events: Sequence[E]) -> list[E]:
        """The events (ids ascending, all above :attr:`last`) that may be handed out now,
        in order; moves the cursor past them."""
        ready: list[E] = []
        for event in events:
            expected = self.last + 1
            if event.id > expected and not self._gap_expired(expected):
                break
            ready.append(event)
            self.last = event.id
        if self._gap_seen is not None and self._gap_seen[0] <= self.last:
            self._gap_seen = None
        return ready

    @property
    def holding(self) -> bool:
        """True while a gap holds events back (the reader should read again soon)."""
        return self._gap_seen is not None

    def _gap_expired(self, missing: int) -> bool:
        now = self._clock()
        if self._gap_seen is None or self._gap_seen[0] != missing:
            self._gap_seen = (missing, now)
        return now - self._gap_seen[1] >= self.gap_wait_s
