"""What an alert channel is: a name in ``[[alerts]] type`` and, for a remote channel, the
body it POSTs for an event.

A *remote* channel (``webhook``, ``slack``) gets outbox rows: :class:`OutboxPlan` writes one
per wanted event inside the engine's transaction, with the body this channel makes, and the
sender delivers it signed, with retries. A *local* channel (``log``) gets no rows: the sender
tails the events table for it (:mod:`watcher.delivery.log_channel`). Each channel lives in
a module of its own and is listed in :mod:`watcher.delivery.channels`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

EventBody = Callable[[dict[str, Any]], dict[str, Any]]
"""The body of one alert, from the event as a dict (id, chain, settlement_id, kind,
severity, payload, created_at)."""


@dataclass(frozen=True)
class AlertChannel:
    """One kind of alert channel."""

    name: str
    """The ``[[alerts]] type`` that selects it (also the outbox rows' ``channel``)."""
    body: EventBody | None
    """The body POSTed for an event; None for a local channel (no outbox rows, no url)."""

    @property
    def remote(self) -> bool:
        """Whether the channel POSTs to a url through the outbox."""
        return self.body is not None
