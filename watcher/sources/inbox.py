"""The webhook inbox of the off-chain sources: verified events stored by any instance,
applied by the source's lease owner under its fencing token (docs/handoff.md).

Whichever instance a webhook reaches stores it (:meth:`WebhookInbox.add`, unfenced: it
decides nothing); the owner applies it at once when it received it, otherwise at its next
lease check (:meth:`WebhookInbox.apply_owned`, run after each one), marking each row applied
under its token. A stale owner's apply and mark are refused by the store like any fenced
write (:class:`~watcher.store.StaleFencingToken`), and the lease is then given up.
"""

from __future__ import annotations

from typing import Any, Protocol

from guard.source import Snapshot
from guard.types import UnixMillis
from watcher.clock import Clock
from watcher.sources.poller import SourcePoller
from watcher.sources.stripe_settings import KIND as STRIPE_KIND
from watcher.store import StaleFencingToken, Store

INBOX_BATCH = 100
"""Inbox rows applied at most per pass (the rest at the next lease check)."""


class Leases(Protocol):
    """What the inbox asks the lease keeper (the handoff manager is one)."""

    @property
    def instance_id(self) -> str: ...

    def owns(self, name: str) -> bool: ...

    def fence(self, name: str) -> tuple[str, int] | None: ...

    def lost(self, name: str, token: int) -> None: ...


class WebhookInbox:
    """The inbox of every source of one daemon (see the module doc)."""

    def __init__(self, store: Store, poller: SourcePoller, leases: Leases, clock: Clock) -> None:
        self.store = store
        self.poller = poller
        self.leases = leases
        self.clock = clock

    def add(self, source: str, ref: str, event: dict[str, Any]) -> None:
        """Store a verified event durably; a redelivery of a stored event is a no-op."""
        self.store.inbox().add(
            source, ref, str(event["id"]), event, self.leases.instance_id, self.clock()
        )

    def apply(self, source: str) -> int:
        """Apply the pending rows of ``source`` (this instance must own it: every write is
        fenced and a stale token raises :class:`StaleFencingToken`); returns how many."""
        done = 0
        for row in self.store.inbox().pending(source, INBOX_BATCH):
            event = dict(row.event)
            received = UnixMillis(row.received_at)
            snapshot = Snapshot(row.ref, received, {"event": event}, (row.event_id,))
            self.poller.receive(source, row.ref, snapshot)  # fenced by the poller
            self.store.inbox().mark_applied(
                source, row.id, self.clock(), self.leases.instance_id, self.leases.fence(source)
            )
            done += 1
        return done

    def apply_owned(self) -> None:
        """After each lease check: apply the inbox of every Stripe source this instance owns
        (webhooks a standby received). Refusals stop at once: the lease is gone."""
        for name, slot in self.poller.slots.items():
            if slot.config.kind != STRIPE_KIND or not self.leases.owns(name):
                continue
            try:
                self.apply(name)
            except StaleFencingToken as exc:
                self.leases.lost(name, exc.token)
