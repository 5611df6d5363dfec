"""Handoff between instances sharing one PostgreSQL store: leases, fencing, takeovers.

Each chain and each off-chain source is processed by one instance at a time: the holder of
its *lease* (``watcher.store.lease_store``). A dedicated thread, the keeper
(:mod:`watcher.handoff.keeper`), renews the leases this instance holds and its liveness row;
a scheduler job runs :meth:`HandoffManager.tick`, which takes free or lapsed leases and
gives one away to balance (the plan is :mod:`watcher.handoff.balance`, a pure function of
the lease table); the chain poll jobs of every instance keep running but do nothing for a
name this instance does not hold. Every processing write carries the lease's fencing token
and the store refuses a stale one, so a predecessor that wakes up after a pause (SIGSTOP, a
long GC, a frozen VM) cannot change anything. Each takeover is recorded with the handoff
guard's four elements (:mod:`watcher.handoff.takeover`).

A rebalance gives one lease away: no new poll starts, the running one finishes under the
chain lock, the lease is released and the successor records reason ``rebalance``. On
SQLite there is only one instance: leases are off, it owns everything and writes unfenced.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from watcher.handoff.balance import (
    NEVER,
    READY_MS,
    Policy,
    Spread,
    plan_give_away,
    plan_spread,
    plan_takes,
)
from watcher.handoff.held import HeldLeases
from watcher.handoff.keeper import LeaseKeeper
from watcher.handoff.lapsed import Alert, LapsedSessions
from watcher.handoff.takeover import HeaderReader, Sealer, TakeoverRecorder
from watcher.store import lease_store as ls
from watcher.store.errors import StoreError
from watcher.store.handoff_store import HandoffStore
from watcher.store.records import Lease
from watcher.store.store import Store

log = logging.getLogger("finality.handoff")

TICK_MAX_S = 0.5
"""Longest interval between lease checks: a standby notices a released lease this fast."""


class FollowedChain(Protocol):
    """What a takeover does to a chain's engine: forget its in-memory state (its writes
    carry the new token: the engine asks :meth:`HandoffManager.fence` at each one), and ask
    its node about the committed head."""

    @property
    def client(self) -> HeaderReader: ...

    def reset(self) -> None: ...


def default_instance_id() -> str:
    """Host name and pid: unique per process, readable in ``finality handoffs``."""
    return f"{socket.gethostname()}:{os.getpid()}"


class HandoffManager:
    """Leases of one instance over the names it may process (chains, then sources)."""

    def __init__(
        self,
        store: Store,
        names: Sequence[str],
        instance_id: str,
        lease_s: float,
        renew_s: float,
        clock: Callable[[], int],
        watchers: Mapping[str, FollowedChain],
        locks: Mapping[str, threading.Lock],
        balance: bool = True,
        signer: Sealer | None = None,
        nodes: Mapping[str, HeaderReader] | None = None,
        alert: Alert | None = None,
    ) -> None:
        """``signer`` signs the four recorded elements of each takeover (None: digests
        only); the daemon passes the receipts key (watcher.app.build). ``nodes``: each
        chain's client, asked about the committed head at a takeover (default: the
        engines' own); the wiring passes it when the engines are built after the manager
        (they take :meth:`fence` from it), and fills ``watchers`` then. ``alert``: see
        :mod:`watcher.handoff.lapsed`."""
        self.store = HandoffStore(store)
        self.names = list(names)
        self.instance_id = instance_id
        self.lease_ms = int(lease_s * 1000)
        self.renew_ms = int(renew_s * 1000)
        self.tick_s = min(renew_s, TICK_MAX_S)  # how often standbys look for a free lease
        self.clock = clock
        self.watchers = watchers
        self.locks = locks
        self.enabled = self.store.enabled
        """Leases only make sense on a shared store; SQLite means one instance owns all."""
        self.leases = HeldLeases(instance_id, self.enabled)
        self.keeper = LeaseKeeper(
            self.leases, self.store, clock, self.lease_ms, self.renew_ms, self.tick_s
        )
        self.lapsed = LapsedSessions(self.store, instance_id, alert)
        nodes = nodes if nodes is not None else {n: w.client for n, w in watchers.items()}
        self.takeovers = TakeoverRecorder(store, self.store, instance_id, clock, nodes, signer)
        self.balance = balance
        """Share the names out with the live peers (``handoff.balance``); False: take every
        free lease and give none away (everything on the first instance)."""
        cooldown_ms = max(4 * int(self.tick_s * 1000), self.renew_ms)
        """After giving a lease away, give no other and take that one not back for this long:
        the peer's take shows in the table within a check or two, so leases never ping-pong."""
        self.policy = Policy(
            instance_id,
            tuple(self.names),
            balance,
            cooldown_ms,
            max(READY_MS, 3 * int(self.tick_s * 1000)),
        )
        self._gave_at: dict[str, int] = {}
        self._last_gave = NEVER
        self.spread: Spread | None = None
        """The spread seen at the last check (GET /v1/leases)."""

    # -- what the pollers ask ------------------------------------------------------------

    @property
    def held(self) -> dict[str, Lease]:
        """The leases this instance holds, by name."""
        return self.leases.held

    @property
    def released(self) -> bool:
        """Whether every lease was given up (SIGTERM)."""
        return self.leases.released

    @property
    def late_renewals(self) -> int:
        """Renewals that committed with less than half of the lease left."""
        return self.keeper.late_renewals

    def blocked(self) -> dict[str, str]:
        """The leases whose takeover waits on the operator, and what to do (``/healthz``)."""
        return dict(self.lapsed.blocked)

    def owns(self, name: str) -> bool:
        """May this instance process ``name`` now (the store still checks the token)."""
        return self.leases.owns(name)

    def fence(self, name: str) -> tuple[str, int] | None:
        """(owner, token) every write of ``name`` carries; see :meth:`HeldLeases.fence`."""
        return self.leases.fence(name)

    def lost(self, name: str, token: int) -> None:
        """A write of ``name`` was refused with ``token``: stop processing it at once."""
        self.leases.lost(name, token)

    # -- the scheduler job ---------------------------------------------------------------

    def tick(self) -> None:
        """Take free or lapsed leases (up to the fair share when balancing), give one away if
        far above it; never raises for store trouble. Renewals and the liveness row are the
        keeper's; while no keeper thread runs (the first check at start-up, a test stepping
        a clock) this check does its round."""
        if self.leases.released:
            return
        if self.enabled:
            if not self.keeper.running:
                self.keeper.keep_alive()
            self._check_leases()

    def _check_leases(self) -> None:
        now = self.clock()
        try:
            rows: list[Lease] | None = self.store.rows()
        except StoreError as exc:
            log.warning("liveness check failed: %s", exc)
            rows = None
        takes = plan_takes(self.policy, rows or [], list(self.held), self._gave_at, now)
        fair = plan_spread(
            rows or [], self.names, self.instance_id, len(self.held), now, self.policy.ready_ms
        ).fair
        for take in takes:
            if self.balance and not take.forced and len(self.held) >= fair:
                continue
            try:
                self._take(take.name)
            except StoreError as exc:
                log.warning("%s: lease check failed: %s", take.name, exc)
        if rows is None or not self.balance:
            return
        self.spread = plan_spread(
            rows, self.names, self.instance_id, len(self.held), now, self.policy.ready_ms
        )
        try:
            self._give_away(self.spread, now)
        except StoreError as exc:
            log.warning("rebalance failed (the lease stays here): %s", exc)

    def _give_away(self, spread: Spread, now: int) -> None:
        """Rebalance: mark one lease as leaving when the plan says so, and release a leaving
        lease once no poll of it runs."""
        if not self.leases.leaving:
            acquired_at = {n: lease.acquired_at for n, lease in self.held.items()}
            gift = plan_give_away(self.policy, spread, acquired_at, self._last_gave, now)
            if gift is None:
                return
            name, taker = gift
            self.leases.leaving.add(name)  # owns() is False from now: no new poll starts
            self._last_gave = now
            log.info(
                "%s: giving the lease away to balance (here %d, %s %d, fair share %d)",
                name,
                spread.held.get(self.instance_id, 0),
                taker,
                spread.held.get(taker, 0),
                spread.fair,
            )
        for name in sorted(self.leases.leaving):
            self._release_leaving(name)

    def _release_leaving(self, name: str) -> None:
        """Release ``name`` if its running poll has finished (the chain lock is free);
        otherwise try again at the next check (the lease is renewed meanwhile)."""
        lock = self.locks.get(name)
        if lock is not None and not lock.acquire(blocking=False):
            return
        try:
            with self.leases.renew_lock:
                lease = self.held.get(name)
                now = self.clock()
                if lease is not None:
                    self.store.release(name, self.instance_id, lease.token, now, rebalance=True)
                    log.info("%s: lease released for a rebalance (token %d)", name, lease.token)
                with self.leases.mutex:
                    self.held.pop(name, None)
                    self.leases.leaving.discard(name)
            self._gave_at[name] = now
            # The watcher keeps its old token: a write that slipped in is refused, never
            # made unfenced.
        finally:
            if lock is not None:
                lock.release()

    def _take(self, name: str) -> None:
        """Try to take ``name``, not held here (the keeper renews what is held)."""
        if name in self.held:
            return
        now = self.clock()
        self.lapsed.end(name, now)
        lease, acquired = self.store.acquire(name, self.instance_id, now, self.lease_ms)
        if lease is None:
            return
        self.leases.renewed[name] = now
        self.leases.last_token[name] = lease.token
        if acquired is None:  # cannot happen without a token; keep the lease all the same
            with self.leases.mutex:
                self.held[name] = lease
            return
        lock = self.locks.get(name)
        if lock is not None:
            with lock:
                self._take_over(name, acquired)
        else:
            self._take_over(name, acquired)

    def _take_over(self, name: str, acquired: ls.Acquired) -> None:
        watcher = self.watchers.get(name)
        if watcher is not None:
            watcher.reset()  # its next write carries the new token: see fence()
        self.held[name] = acquired.lease
        try:
            record = self.record_takeover(name, acquired)
        except StoreError as exc:
            log.warning("%s: took the lease but could not record the handoff: %s", name, exc)
            return
        prev = acquired.previous
        log.info(
            "%s: took over from %s (token %s -> %d, %s): %s",
            name,
            prev.owner if prev else None,
            prev.token if prev else None,
            acquired.lease.token,
            acquired.reason,
            record["verdict"],
        )

    def record_takeover(self, name: str, acquired: ls.Acquired) -> dict[str, Any]:
        """Apply the handoff guard to ``name``'s stored state and store the record."""
        return self.takeovers.record(name, acquired)

    # -- the keeper and the end ------------------------------------------------------------

    def start_keeper(self) -> None:
        """Start the keeper thread (leases on only): it renews the liveness row every
        ``tick_s`` and each held lease every ``renew_s``, apart from the scheduler's pool,
        taking no chain lock, until :meth:`stop_keeper`."""
        if self.enabled:
            self.keeper.start()

    def stop_keeper(self) -> None:
        """Stop the keeper and wait for a renewal in progress."""
        self.keeper.stop()

    def keep_alive(self, late_s: float = 0.0) -> None:
        """One keeper round (see :meth:`LeaseKeeper.keep_alive`)."""
        self.keeper.keep_alive(late_s)

    def release_all(self) -> None:
        """SIGTERM: give every held lease up so a standby takes over at its next check."""
        if not self.enabled:
            return
        self.stop_keeper()
        self.leases.released = True
        now = self.clock()
        try:
            self.store.leave(self.instance_id)  # peers recount at once
        except StoreError as exc:
            log.warning("cannot delete the liveness row (it will lapse): %s", exc)
        for name, lease in list(self.held.items()):
            try:
                self.store.release(name, self.instance_id, lease.token, now)
            except StoreError as exc:
                log.warning("%s: cannot release the lease (it will lapse): %s", name, exc)
        if self.held:
            log.info("released leases: %s", ", ".join(sorted(self.held)))
        self.held.clear()
        self.leases.leaving.clear()
