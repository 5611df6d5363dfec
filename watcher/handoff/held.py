"""What this instance holds: its leases, the last token per name, and who may write.

Shared by the manager's lease check (takes, gives away) and the keeper thread (renews):
:attr:`HeldLeases.mutex` guards :attr:`held`, and :attr:`renew_lock` is held by a renewal
and a release, so that a lease given up is never renewed back to life and a release never
looks like a lost lease.
"""

from __future__ import annotations

import logging
import threading

from watcher.store.records import Lease

log = logging.getLogger("finality.handoff")


class HeldLeases:
    """The in-memory view of the leases one instance holds."""

    def __init__(self, instance_id: str, enabled: bool) -> None:
        self.instance_id = instance_id
        self.enabled = enabled
        """False on SQLite: one instance owns everything and writes unfenced."""
        self.held: dict[str, Lease] = {}
        self.last_token: dict[str, int] = {}
        """The token this instance last held per name (for the refusal of a late write)."""
        self.renewed: dict[str, int] = {}
        """When each held lease was last renewed (or taken)."""
        self.leaving: set[str] = set()
        """Names being given away: no new poll starts; released once the running one ends."""
        self.released = False
        """Set by a release of everything (SIGTERM): nothing is taken or renewed again."""
        self.mutex = threading.Lock()
        self.renew_lock = threading.Lock()

    def owns(self, name: str) -> bool:
        """May this instance process ``name`` now (the store still checks the token)."""
        return not self.enabled or (
            name in self.held and not self.released and name not in self.leaving
        )

    def fence(self, name: str) -> tuple[str, int] | None:
        """(owner, token) every write of ``name`` carries (blocks of a source, receipts, the
        webhook inbox); None only when leases are off. An instance that does not hold the
        lease (it lost it between its ``owns`` check and the write) gets the last token it
        held (0 if none), so the store refuses the write *and records it*, exactly as a
        block write of a paused owner: never an unfenced write on a shared store."""
        if not self.enabled:
            return None
        lease = self.held.get(name)
        if lease is not None and not self.released:
            return (self.instance_id, lease.token)
        return (self.instance_id, self.last_token.get(name, 0))

    def lost(self, name: str, token: int) -> None:
        """A write of ``name`` was refused with ``token``: stop processing it at once."""
        with self.mutex:
            lease = self.held.get(name)
            if lease is not None and lease.token == token:
                del self.held[name]
                self.leaving.discard(name)
        # The watcher keeps its (now stale) token: a poll already waiting for the chain lock
        # writes with it and is refused. Clearing it would make that write unfenced.
        log.warning("%s: lease lost (token %d refused); stopped processing it", name, token)

    def snapshot(self) -> dict[str, Lease]:
        """A copy of the held leases."""
        with self.mutex:
            return dict(self.held)
