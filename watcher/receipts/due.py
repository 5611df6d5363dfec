"""What the receipts component owes per chain, and in which order it pays.

A settlement is *due* from the event that made it terminal (or reversed it) until its
receipt is stored. A receipt that cannot be built yet (the node lags, the chain moved away
from the decision's evidence) waits out a backoff; a new decision resets it (a reorg
re-decides the settlement on the new branch: try at once).

Order, per tick: fresh decisions first, in the order their events came (a block's
settlements together), then the retries whose wait is over, the longest waiting first. A
backlog of receipts that keep failing therefore never holds up the receipts of a new
block: at most :data:`BUILDS_PER_POLL` are tried per tick, fresh ones taking the places.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from watcher.store import SettlementRecord

BACKOFF_MS = (1_000, 2_000, 5_000, 15_000, 60_000, 300_000)
"""Waits between attempts at a receipt that could not be built yet."""

BUILDS_PER_POLL = 50
"""Receipts built at most per tick (stored in groups as they are built: the component's
``STORED_TOGETHER``); the rest go on in the next tick right away, so the poll and API
threads get the interpreter in between."""


@dataclass
class Due:
    """A settlement that may need a receipt or a revocation."""

    revoke: set[str] = field(default_factory=set)
    """Decision digests reversed by a finality violation: their receipts are withdrawn."""
    violation: dict[str, Any] = field(default_factory=dict)
    """The violation event (id and payload), for the revocation's evidence."""
    attempts: int = 0
    """Failed attempts at the current decision."""
    next_at: int = 0
    """Not before this instant (ms)."""

    def renew(self) -> None:
        """A new decision: no old backoff (it was about the evidence of another)."""
        self.attempts, self.next_at = 0, 0

    def postpone(self, now: int) -> int:
        """One more failed attempt: the next is not before ``now`` + the returned wait."""
        self.attempts += 1
        wait = BACKOFF_MS[min(self.attempts, len(BACKOFF_MS)) - 1]
        self.next_at = now + wait
        return wait


def ready(due: dict[str, Due], now: int, limit: int = BUILDS_PER_POLL) -> list[str]:
    """The settlements to try now, at most ``limit``: fresh decisions first (in the order
    noted), then retries by how long they have waited."""
    fresh = [sid for sid, entry in due.items() if entry.attempts == 0 and entry.next_at <= now]
    if len(fresh) >= limit:
        return fresh[:limit]
    retries = sorted(
        (entry.next_at, sid)
        for sid, entry in due.items()
        if entry.attempts > 0 and entry.next_at <= now
    )
    return fresh + [sid for _, sid in retries[: limit - len(fresh)]]


def block_of(rec: SettlementRecord | None) -> int:
    """The block a settlement's decision rests on (0 when none: a source, a timeout): a
    batch is built in block order, so a block's settlements share its headers and tries."""
    facts = ((rec.decision.get("evidence") or {}).get("facts") or {}) if rec else {}
    number = facts.get("block_number")
    return number if isinstance(number, int) else 0
