"""The outbox's vocabulary: row states, the commit channel, what enqueueing writes and how
a claimed attempt ended (see ``watcher/store/outbox_store.py`` for a row's life)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from watcher.store.records import DeliveryRecord

PENDING, SENDING, DELIVERED, DEAD, CANCELLED = (
    "pending",
    "sending",
    "delivered",
    "dead",
    "cancelled",
)
STATES = (PENDING, SENDING, DELIVERED, DEAD, CANCELLED)
"""Every state a delivery can be in."""

COMMIT_CHANNEL = "commit"
"""Channel of the rows sent to a settlement's ``commit_url`` (ordered per settlement)."""


@dataclass(frozen=True)
class NewDelivery:
    """What enqueueing writes."""

    channel: str
    """``commit`` (to a settlement's commit_url), ``webhook`` or ``slack``."""
    kind: str
    """``commit``, ``discard``, ``provisional``, or the alert's event kind."""
    url: str
    """Where it is POSTed."""
    idempotency_key: str
    """Stable across retries and restarts; unique in the table."""
    settlement_id: str | None = None
    """Settlement concerned, if any."""
    event_id: int | None = None
    """The event it reports (alerts), or the verdict's lifecycle event (commit/discard)."""
    body: dict[str, Any] | None = None
    """The JSON body; ``None`` until assembled (commit/discard wait for their receipt)."""


@dataclass(frozen=True)
class Outcome:
    """How one claimed attempt ended: what :meth:`Outbox.finish` writes."""

    rec: DeliveryRecord
    """The row as claimed (its ``attempts`` is the claim's token)."""
    state: str
    """``delivered``, ``pending`` (retry, or given back unattempted) or ``dead``."""
    at: int
    """When it ended (ms)."""
    status: int | None = None
    """HTTP status of the answer, if any."""
    error: str | None = None
    """Why it failed."""
    due_at: int | None = None
    """When a ``pending`` row is due again."""
    attempted: bool = True
    """False when the row is given back without a request (its receipt is awaited)."""

    def params(self) -> dict[str, Any]:
        """Parameters of :data:`_FINISH` for this outcome (every column it may set)."""
        rec = self.rec
        if not self.attempted:  # given back: the claim did not count as an attempt
            return {
                "b_id": rec.id,
                "b_attempts": rec.attempts,
                "b_state": self.state,
                "b_new_attempts": rec.attempts - 1,
                "b_next": self.due_at,
                "b_status": rec.last_status,
                "b_error": rec.last_error,
                "b_delivered_at": rec.delivered_at,
                "b_now": self.at,
            }
        return {
            "b_id": rec.id,
            "b_attempts": rec.attempts,
            "b_state": self.state,
            "b_new_attempts": rec.attempts,
            "b_next": self.due_at if self.due_at is not None else rec.next_attempt_at,
            "b_status": self.status,
            "b_error": None if self.error is None else self.error[:2000],
            "b_delivered_at": self.at if self.state == DELIVERED else None,
            "b_now": self.at,
        }
