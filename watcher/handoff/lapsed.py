"""Ending a frozen owner's database sessions before taking its lapsed lease.

A process stopped in the middle of a pipeline keeps its transaction's locks, the lease row's
among them, with no server timer to end them (``lease_store.end_lapsed_sessions`` says why
and which sessions); a standby ends them so its takeover does not wait. Done by the handoff
manager before each take; a database role that may not signal them is said once per reason.
"""

from __future__ import annotations

import logging

from watcher.store.errors import StoreError
from watcher.store.handoff_store import HandoffStore

log = logging.getLogger("finality.handoff")


class LapsedSessions:
    """Ends the lease-locking sessions of a lapsed owner, for one taking instance."""

    def __init__(self, store: HandoffStore, instance_id: str) -> None:
        self.store = store
        self.instance_id = instance_id
        self._trouble: dict[str, str] = {}
        """Why ending them failed, by lease name (logged once per reason, not every check)."""

    def end(self, name: str, now: int) -> list[int]:
        """End the sessions of ``name``'s lapsed owner that hold a lease lock; their pids."""
        try:
            ended = self.store.end_lapsed_sessions(name, self.instance_id, now)
        except StoreError as exc:
            if self._trouble.get(name) != str(exc):
                log.warning(
                    "%s: cannot end the lapsed owner's database sessions (%s): a takeover "
                    "waits until they end; give this database role pg_signal_backend",
                    name,
                    exc,
                )
            self._trouble[name] = str(exc)
            return []
        self._trouble.pop(name, None)
        if ended:
            log.warning(
                "%s: ended %d database session(s) of the lapsed owner holding a lease lock "
                "(pids %s), so the takeover does not wait on them",
                name,
                len(ended),
                ", ".join(map(str, ended)),
            )
        return ended
