"""Ending a frozen owner's database sessions before taking its lapsed lease.

A process stopped in the middle of a pipeline keeps its transaction's locks, the lease row's
among them, with no server timer to end them (``lease_store.end_lapsed_sessions`` says why
and which sessions); a standby ends them so its takeover does not wait. Done by the handoff
manager before each take. A database role that may not end them leaves the takeover waiting
on a frozen process, which nothing heals: that is said once per reason, in the log and as a
``takeover_blocked`` alert naming what the operator must do, and shown by ``/healthz`` until a
take gets past it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from guard.event_kinds import EventKind
from watcher.store.errors import StoreError
from watcher.store.handoff_store import HandoffStore

log = logging.getLogger("finality.handoff")


Alert = Callable[[str, str, dict[str, Any]], bool]
"""Stores one critical event (lease name, kind, payload) with its alert deliveries; False
if the store failed (the next check tries again)."""


class LapsedSessions:
    """Ends the lease-locking sessions of a lapsed owner, for one taking instance."""

    def __init__(self, store: HandoffStore, instance_id: str, alert: Alert | None = None) -> None:
        self.store = store
        self.instance_id = instance_id
        self.alert = alert
        self.blocked: dict[str, str] = {}
        """What the operator must do, by lease name, while ending the lapsed owner's sessions
        fails (``/healthz`` shows it)."""
        self._alerted: dict[str, str] = {}
        """The trouble each lease's alert was stored for (once per reason, not per check)."""

    def end(self, name: str, now: int) -> list[int]:
        """End the sessions of ``name``'s lapsed owner that hold a lease lock; their pids."""
        try:
            ended = self.store.end_lapsed_sessions(name, self.instance_id, now)
        except StoreError as exc:
            self._blocked(name, str(exc))
            return []
        self.blocked.pop(name, None)
        self._alerted.pop(name, None)
        if ended:
            log.warning(
                "%s: ended %d database session(s) of the lapsed owner holding a lease lock "
                "(pids %s), so the takeover does not wait on them",
                name,
                len(ended),
                ", ".join(map(str, ended)),
            )
        return ended

    def _blocked(self, name: str, error: str) -> None:
        """Say once per reason that ``name``'s takeover waits, and what would end the wait."""
        action = (
            f"cannot end the lapsed owner's database sessions ({error}): the takeover waits "
            "until they end; give this instance's database role pg_signal_backend, or stop "
            "the lapsed owner's process"
        )
        self.blocked[name] = action
        if self._alerted.get(name) == error:
            return
        log.warning("%s: %s", name, action)
        payload = {"lease": name, "instance": self.instance_id, "reason": action}
        if self.alert is None or self.alert(name, EventKind.TAKEOVER_BLOCKED, payload):
            self._alerted[name] = error
