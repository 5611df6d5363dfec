"""The lease keeper: a thread of its own that renews the liveness row and the held leases.

It is apart because a healthy owner that is merely busy must never lose its lease (each
lapse costs a takeover). Measured before it existed, under a catch-up of 900 settlements:
the renewal (then ``SELECT ... FOR UPDATE`` on the lease row, in the scheduler job) queued
behind the ``FOR SHARE`` lock every block transaction of the same chain holds on that row,
for 1 to 2 s and up to its ``lock_timeout``, while the heartbeat next to it took 10 to 80
ms; the job ran over its interval, APScheduler skipped its next runs (``max_instances=1``),
and peers took the leases as lapsed. Now a renewal is one ``UPDATE ... WHERE owner AND
token`` (``lease_store.renew``) that does not conflict with the writes' ``FOR KEY SHARE``,
run by a thread that takes no chain lock and shares no pool with processing, and a renewal
that comes late says so (a warning with its timings).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from watcher.handoff.held import HeldLeases
from watcher.store.errors import StoreError
from watcher.store.handoff_store import HandoffStore
from watcher.store.records import Lease

log = logging.getLogger("finality.handoff")

LATE_FRACTION = 0.5
"""A renewal that commits with less than this fraction of the lease left came late: the
keeper logs a warning with its timings (on time, with ``renew_s <= lease_s / 3``, at
least two thirds are left)."""


class LeaseKeeper:
    """Renews what :class:`HeldLeases` holds, every ``tick_s`` (each lease every ``renew_ms``)."""

    def __init__(
        self,
        leases: HeldLeases,
        store: HandoffStore,
        clock: Callable[[], int],
        lease_ms: int,
        renew_ms: int,
        tick_s: float,
    ) -> None:
        self.leases = leases
        self.store = store
        self.clock = clock
        self.lease_ms = lease_ms
        self.renew_ms = renew_ms
        self.tick_s = tick_s
        self.late_renewals = 0
        """Renewals that committed with less than :data:`LATE_FRACTION` of the lease left."""
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def running(self) -> bool:
        """Whether the keeper thread runs (otherwise the lease check renews itself)."""
        return self._thread is not None

    def start(self) -> None:
        """Start the keeper thread, until :meth:`stop`."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._keep, name="lease-keeper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the keeper and wait for a renewal in progress (it is bounded by the
        renewal's lock timeout)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)

    def _keep(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set() and not self.leases.released:
            try:
                self.keep_alive(late_s=max(0.0, time.monotonic() - due))
            except Exception:  # the keeper must outlive any surprise; the next round retries
                log.exception("lease keeper round failed")
            due = max(due + self.tick_s, time.monotonic())
            self._stop.wait(due - time.monotonic())

    def keep_alive(self, late_s: float = 0.0) -> None:
        """One keeper round: the liveness row, then every held lease whose renewal is due.
        ``late_s``: how long after its due time the round started (for the warning)."""
        started = time.monotonic()
        try:
            self.store.heartbeat(self.leases.instance_id, self.clock(), self.lease_ms)
        except StoreError as exc:
            log.warning("liveness row not renewed: %s", exc)
        heartbeat_s = time.monotonic() - started
        # Due within the next round counts as due now: otherwise the round granularity
        # would stretch the renewal period up to renew_s + tick_s.
        due_ms = self.renew_ms - int(self.tick_s * 1000)
        for name, lease in sorted(self.leases.snapshot().items()):
            if self.clock() - self.leases.renewed.get(name, lease.acquired_at) < due_ms:
                continue
            try:
                self._renew(name, lease, late_s, heartbeat_s)
            except StoreError as exc:
                log.warning(
                    "%s: renewal failed (tried again in %.2f s): %s", name, self.tick_s, exc
                )

    def _renew(self, name: str, lease: Lease, late_s: float, heartbeat_s: float) -> None:
        """Renew one held lease (one ``UPDATE`` that does not wait for the chain's writes);
        a superseded token is recorded as a refusal and the name dropped."""
        leases = self.leases
        with leases.renew_lock:
            with leases.mutex:
                current = leases.held.get(name)
            if current is None or current.token != lease.token or leases.released:
                return  # released or lost meanwhile
            began = time.monotonic()
            now = self.clock()
            ok = self.store.renew(name, leases.instance_id, lease.token, now, self.lease_ms)
            took_s = time.monotonic() - began
            if not ok:
                self.store.refuse_renewal(name, leases.instance_id, lease.token, now)
                leases.lost(name, lease.token)
                return
            with leases.mutex:
                if leases.held.get(name) is current:
                    leases.held[name] = replace(current, expires_at=now + self.lease_ms)
            leases.renewed[name] = now
        left_ms = current.expires_at - self.clock()
        if left_ms < LATE_FRACTION * self.lease_ms:
            self.late_renewals += 1
            log.warning(
                "%s: lease renewed late, %d ms of the %d ms lease were left (round started "
                "%.0f ms after due, heartbeat %.0f ms, renewal %.0f ms): a peer may take a "
                "busy owner's lease if this grows",
                name,
                left_ms,
                self.lease_ms,
                late_s * 1000,
                heartbeat_s * 1000,
                took_s * 1000,
            )
