"""Handoff between instances sharing one PostgreSQL store: leases, fencing, takeovers.

Each chain and each off-chain source is processed by one instance at a time: the holder of
its *lease* (``watcher.store.lease_store``). A dedicated thread, the *keeper*, renews the
leases this instance holds and its liveness row; a scheduler job tries to take free or
lapsed leases and gives one away to balance; the chain poll jobs of every instance keep
running but do nothing for a name this instance does not hold.

The keeper is apart because a healthy owner that is merely busy must never lose its lease
(each lapse costs a takeover). Measured before it existed, under a catch-up of 900
settlements: the renewal (then ``SELECT ... FOR UPDATE`` on the lease row, in the scheduler
job) queued behind the ``FOR SHARE`` lock every block transaction of the same chain holds
on that row, for 1 to 2 s and up to its ``lock_timeout``, while the heartbeat next to it
took 10 to 80 ms; the job ran over its interval, APScheduler skipped its next runs
(``max_instances=1``), and peers took the leases as lapsed. Now a renewal is one
``UPDATE ... WHERE owner AND token`` (``lease_store.renew``) that does not conflict with the
writes' ``FOR KEY SHARE``, run by a thread that takes no chain lock and shares no pool with
processing, and a renewal that comes late says so (a warning with its timings). Every processing write
carries the lease's fencing token and the store refuses a stale one, so a predecessor that
wakes up after a pause (SIGSTOP, a long GC, a frozen VM) cannot change anything.

At every takeover the successor applies the handoff guard (``guard.handoff``) and stores a
record with the four recorded elements:

- ``transaction_state_checkpoint_receipt``: the committed state (each block is one store
  transaction, so the committed state *is* the checkpoint): head, header window, verdicts,
  outbox position;
- ``in_flight_operation_registry_receipt``: outbox rows not yet acknowledged (the outbox is
  written in the same transaction as the verdict, so it is the registry), and the block
  processing the predecessor may have begun after its last committed head;
- ``handoff_lock_signature``: previous and new owner and fencing token;
- ``transaction_recovery_predicate_receipt``: per in-flight operation, the check the successor
  runs and what it found (the stored head against the node; a delivery is re-sent with the
  same Idempotency-Key once its row lease ends, which the receiver deduplicates).

Each element carries the ``sha256:`` digest of its canonical body and, once the receipts
component gave this manager its signer (:attr:`HandoffManager.signer`), a signed receipt
(``receipt``: :mod:`guard.handoff_receipts`) that ``finality verify`` checks offline. Records
written before elements were signed have only the digest; they are listed all the same. On
SQLite there is only one instance: leases are off, it owns everything and writes unfenced, as
before.

Sharing the names out (``balance``, on by default): every instance keeps a liveness row
(``lease_store.heartbeat``) renewed at every check, so each knows how many instances are
alive, standbys included. The *fair share* is ``ceil(names / alive)``. An instance takes a
free or lapsed lease only while it holds fewer than that; one holding at least two more than
a ready peer that is below the fair share gives one lease away per check (a *rebalance*: no
new poll starts, the running one finishes under the chain lock, the lease is released and
the successor records reason ``rebalance``), then waits a cool-down before giving another,
and does not take back what it gave within the cool-down. :func:`plan_spread` is that rule.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, or_, select
from sqlalchemy.exc import SQLAlchemyError

from chains.errors import ChainError
from guard.canonical import digest
from guard.handoff import HandoffDecision, HandoffState, RecoveryOutcome, evaluate_handoff
from guard.handoff_receipts import HANDOFF_KINDS, Takeover, handoff_body
from guard.receipts import OFFCHAIN_CHAIN_ID
from guard.verify import verify_receipt
from watcher.store import StoreError
from watcher.store import lease_store as ls
from watcher.store import schema as s

if TYPE_CHECKING:
    from watcher.engine import ChainWatcher
    from watcher.signer import Signer
    from watcher.store import Store

log = logging.getLogger("finality.handoff")

TICK_MAX_S = 0.5
"""Longest interval between lease checks: a standby notices a released lease this fast."""


LATE_FRACTION = 0.5
"""A renewal that commits with less than this fraction of the lease left came late: the
keeper logs a warning with its timings (on time, with ``renew_s <= lease_s / 3``, at
least two thirds are left)."""


READY_MS = 1_500
"""A peer whose last heartbeat is older than this (or 3 checks) is not trusted to take a
lease given away: it may be dying; its row lapses with its leases."""


def default_instance_id() -> str:
    """Host name and pid: unique per process, readable in ``finality handoffs``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def fair_share(names: int, alive: int) -> int:
    """How many names one of ``alive`` instances should hold: ``ceil(names / alive)``."""
    return -(-names // max(1, alive))


@dataclass(frozen=True)
class Spread:
    """Who holds how many of the names, as one instance sees it at a check."""

    alive: frozenset[str]
    """Instances whose liveness row has not lapsed (this one included)."""
    ready: frozenset[str]
    """Alive peers that sent a heartbeat recently: they will take a lease given away."""
    held: dict[str, int]
    """Live leases per instance, over the names this instance follows."""
    fair: int
    """The fair share: ``ceil(names / alive)``."""

    def taker(self, me: str) -> str | None:
        """A ready peer below the fair share holding at least two fewer names than ``me``
        (so that giving it one cannot make it give one back): None if there is none."""
        mine = self.held.get(me, 0)
        below = sorted(
            (self.held.get(p, 0), p)
            for p in self.ready
            if p != me and self.held.get(p, 0) < self.fair and self.held.get(p, 0) + 2 <= mine
        )
        return below[0][1] if below else None


def plan_spread(
    rows: Sequence[ls.Lease], names: Sequence[str], me: str, held: int, now: int, ready_ms: int
) -> Spread:
    """The :class:`Spread` of ``names`` from the lease table's rows; ``held`` is this
    instance's own count (its in-memory view, ahead of the rows it is renewing)."""
    followed = set(names)
    alive = {me}
    ready = {me}
    counts: Counter[str] = Counter()
    for row in rows:
        if row.expires_at <= now or row.owner is None:
            continue
        if row.name.startswith(ls.INSTANCE_PREFIX):
            alive.add(row.owner)
            if row.acquired_at >= now - ready_ms:
                ready.add(row.owner)
        elif row.name in followed:
            counts[row.owner] += 1
    counts[me] = held
    return Spread(
        frozenset(alive), frozenset(ready), dict(counts), fair_share(len(names), len(alive))
    )


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
        watchers: dict[str, ChainWatcher],
        locks: dict[str, threading.Lock],
        balance: bool = True,
    ) -> None:
        self.store = store
        self.names = list(names)
        self.instance_id = instance_id
        self.lease_ms = int(lease_s * 1000)
        self.renew_ms = int(renew_s * 1000)
        self.tick_s = min(renew_s, TICK_MAX_S)
        """Standbys look for a free lease this often; owners renew every ``renew_ms``."""
        self._renewed: dict[str, int] = {}
        self._renew_lock = threading.Lock()
        """Held by the keeper while it renews and by a release: a lease given up is never
        renewed back to life, and a release never looks like a lost lease."""
        self._keeper: threading.Thread | None = None
        self._keeper_stop = threading.Event()
        self.late_renewals = 0
        """Renewals that committed with less than :data:`LATE_FRACTION` of the lease left."""
        self.clock = clock
        self.watchers = watchers
        self.locks = locks
        self.enabled = store.dialect == "postgresql"
        """Leases only make sense on a shared store; SQLite means one instance owns all."""
        self.held: dict[str, ls.Lease] = {}
        self._last_token: dict[str, int] = {}
        """The token this instance last held per name (for the refusal of a late write)."""
        self._mutex = threading.Lock()
        self.released = False
        self.after_tick: list[Callable[[], None]] = []
        """Run after every lease check (every ``tick_s`` with leases on, once at start on
        SQLite), in the scheduler's lease job; each decides itself what this instance owns."""
        self.signer: Signer | None = None
        """Signs the four recorded elements of each takeover; set by the receipts component
        (watcher/receipts.py), which loads the daemon's key. None: digests only."""
        self.balance = balance
        """Share the names out with the live peers (``handoff.balance``); False: take every
        free lease and give none away (everything on the first instance)."""
        self.cooldown_ms = max(4 * int(self.tick_s * 1000), self.renew_ms)
        """After giving a lease away, give no other and take that one not back for this long:
        the peer's take shows in the table within a check or two, so leases never ping-pong."""
        self.ready_ms = max(READY_MS, 3 * int(self.tick_s * 1000))
        self._leaving: set[str] = set()
        """Names being given away: no new poll starts; released once the running one ends."""
        self._gave_at: dict[str, int] = {}
        self._last_gave = -(10**15)
        self.spread: Spread | None = None
        """The spread seen at the last check (GET /v1/leases)."""

    # -- what the pollers ask ------------------------------------------------------------

    def owns(self, name: str) -> bool:
        """May this instance process ``name`` now (the store still checks the token)."""
        return not self.enabled or (
            name in self.held and not self.released and name not in self._leaving
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
        return (self.instance_id, self._last_token.get(name, 0))

    def lost(self, name: str, token: int) -> None:
        """A write of ``name`` was refused with ``token``: stop processing it at once."""
        with self._mutex:
            lease = self.held.get(name)
            if lease is not None and lease.token == token:
                del self.held[name]
                self._leaving.discard(name)
        # The watcher keeps its (now stale) token: a poll already waiting for the chain lock
        # writes with it and is refused. Clearing it would make that write unfenced.
        log.warning("%s: lease lost (token %d refused); stopped processing it", name, token)

    # -- the scheduler job ---------------------------------------------------------------

    def tick(self) -> None:
        """Take free or lapsed leases (up to the fair share when balancing), give one away if
        far above it, then run :attr:`after_tick` (the owner's periodic work, e.g. applying
        webhooks a standby received); never raises for store trouble. Renewals and the
        liveness row are the keeper's (:meth:`keep_alive`); while no keeper thread runs
        (the first check at start-up, a test stepping a clock) this check does its round."""
        if self.released:
            return
        if self.enabled:
            if self._keeper is None:
                self.keep_alive()
            self._check_leases()
        for hook in list(self.after_tick):
            try:
                hook()
            except (StoreError, SQLAlchemyError) as exc:
                log.warning("after the lease check: %s", exc)

    def _heartbeat(self, now: int) -> None:
        try:
            ls.heartbeat(self.store.writer, self.instance_id, now, self.lease_ms)
        except (StoreError, SQLAlchemyError) as exc:
            log.warning("liveness row not renewed: %s", exc)

    def _check_leases(self) -> None:
        now = self.clock()
        try:
            rows = ls.all_rows(self.store.writer)
        except (StoreError, SQLAlchemyError) as exc:
            log.warning("liveness check failed: %s", exc)
            rows = None
        current = {r.name: r for r in rows or ()}
        for name in self.names:
            if name not in self.held and not self._may_take(name, current, now):
                continue
            try:
                self._tick_one(name)
            except (StoreError, SQLAlchemyError) as exc:
                log.warning("%s: lease check failed: %s", name, exc)
        if rows is None or not self.balance:
            return
        self.spread = plan_spread(
            rows, self.names, self.instance_id, len(self.held), now, self.ready_ms
        )
        try:
            self._give_away(self.spread, now)
        except (StoreError, SQLAlchemyError) as exc:
            log.warning("rebalance failed (the lease stays here): %s", exc)

    def _may_take(self, name: str, current: dict[str, ls.Lease], now: int) -> bool:
        """Try to take ``name`` (not held) now? Only if it is free or lapsed and, when
        balancing, this instance is below the fair share and did not just give it away."""
        row = current.get(name)
        if row is not None and row.expires_at > now:
            return False  # a live owner: acquire() would refuse anyway
        if not self.balance:
            return True
        if now - self._gave_at.get(name, -(10**15)) < self.cooldown_ms:
            return False
        spread = plan_spread(
            list(current.values()), self.names, self.instance_id, len(self.held), now, self.ready_ms
        )
        if row is not None and not ls.released(row.expires_at) and row.owner not in spread.ready:
            # Lapsed, and its owner sends no heartbeat either (kill -9, a pause): take it at
            # once, as without balancing; the spread evens out once its row lapses too.
            return True
        return len(self.held) < spread.fair

    def _give_away(self, spread: Spread, now: int) -> None:
        """Rebalance: mark one lease as leaving when a ready peer is far below this
        instance, and release a leaving lease once no poll of it runs."""
        if not self._leaving:
            taker = spread.taker(self.instance_id)
            if taker is None or now - self._last_gave < self.cooldown_ms:
                return
            settled = [
                n for n, lease in self.held.items() if now - lease.acquired_at >= self.cooldown_ms
            ]
            if not settled:
                return  # every lease here is new: let the spread settle first
            name = max(settled, key=lambda n: (self.held[n].acquired_at, n))
            self._leaving.add(name)  # owns() is False from now: no new poll starts
            self._last_gave = now
            log.info(
                "%s: giving the lease away to balance (here %d, %s %d, fair share %d)",
                name,
                spread.held.get(self.instance_id, 0),
                taker,
                spread.held.get(taker, 0),
                spread.fair,
            )
        for name in sorted(self._leaving):
            self._release_leaving(name)

    def _release_leaving(self, name: str) -> None:
        """Release ``name`` if its running poll has finished (the chain lock is free);
        otherwise try again at the next check (the lease is renewed meanwhile)."""
        lock = self.locks.get(name)
        if lock is not None and not lock.acquire(blocking=False):
            return
        try:
            with self._renew_lock:
                lease = self.held.get(name)
                now = self.clock()
                if lease is not None:
                    ls.release(
                        self.store.writer, name, self.instance_id, lease.token, now, rebalance=True
                    )
                    log.info("%s: lease released for a rebalance (token %d)", name, lease.token)
                with self._mutex:
                    self.held.pop(name, None)
                    self._leaving.discard(name)
            self._gave_at[name] = now
            # The watcher keeps its old token: a write that slipped in is refused, never
            # made unfenced.
        finally:
            if lock is not None:
                lock.release()

    def _tick_one(self, name: str) -> None:
        """Try to take ``name``, not held here (the keeper renews what is held)."""
        if name in self.held:
            return
        now = self.clock()
        lease, acquired = ls.acquire(
            self.store.writer, name, self.instance_id, now, self.lease_ms, None
        )
        if lease is None:
            return
        self._renewed[name] = now
        self._last_token[name] = lease.token
        if acquired is None:  # cannot happen without a token; keep the lease all the same
            with self._mutex:
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
            watcher.reset()
            watcher.fence = (self.instance_id, acquired.lease.token)
        self.held[name] = acquired.lease
        try:
            record = self.record_takeover(name, acquired)
        except (StoreError, SQLAlchemyError) as exc:
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

    # -- the keeper ------------------------------------------------------------------------

    def start_keeper(self) -> None:
        """Start the keeper thread (leases on only): it renews the liveness row every
        ``tick_s`` and each held lease every ``renew_s``, apart from the scheduler's pool,
        taking no chain lock, until :meth:`stop_keeper`."""
        if not self.enabled or self._keeper is not None:
            return
        self._keeper_stop.clear()
        self._keeper = threading.Thread(target=self._keep, name="lease-keeper", daemon=True)
        self._keeper.start()

    def stop_keeper(self) -> None:
        """Stop the keeper and wait for a renewal in progress (it is bounded by the
        renewal's lock timeout)."""
        self._keeper_stop.set()
        keeper, self._keeper = self._keeper, None
        if keeper is not None and keeper is not threading.current_thread():
            keeper.join(timeout=10)

    def _keep(self) -> None:
        due = time.monotonic()
        while not self._keeper_stop.is_set() and not self.released:
            try:
                self.keep_alive(late_s=max(0.0, time.monotonic() - due))
            except Exception:  # the keeper must outlive any surprise; the next round retries
                log.exception("lease keeper round failed")
            due = max(due + self.tick_s, time.monotonic())
            self._keeper_stop.wait(due - time.monotonic())

    def keep_alive(self, late_s: float = 0.0) -> None:
        """One keeper round: the liveness row, then every held lease whose renewal is due.
        ``late_s``: how long after its due time the round started (for the warning)."""
        started = time.monotonic()
        self._heartbeat(self.clock())
        heartbeat_s = time.monotonic() - started
        with self._mutex:
            held = dict(self.held)
        # Due within the next round counts as due now: otherwise the round granularity
        # would stretch the renewal period up to renew_s + tick_s.
        due_ms = self.renew_ms - int(self.tick_s * 1000)
        for name, lease in sorted(held.items()):
            if self.clock() - self._renewed.get(name, lease.acquired_at) < due_ms:
                continue
            try:
                self._renew(name, lease, late_s, heartbeat_s)
            except (StoreError, SQLAlchemyError) as exc:
                log.warning(
                    "%s: renewal failed (tried again in %.2f s): %s", name, self.tick_s, exc
                )

    def _renew(self, name: str, lease: ls.Lease, late_s: float, heartbeat_s: float) -> None:
        """Renew one held lease (one ``UPDATE`` that does not wait for the chain's writes);
        a superseded token is recorded as a refusal and the name dropped."""
        with self._renew_lock:
            with self._mutex:
                current = self.held.get(name)
            if current is None or current.token != lease.token or self.released:
                return  # released or lost meanwhile
            began = time.monotonic()
            now = self.clock()
            ok = ls.renew(
                self.store.writer, name, self.instance_id, lease.token, now, self.lease_ms
            )
            took_s = time.monotonic() - began
            if not ok:
                ls.record_rejection(
                    self.store.writer, _stale(name, self.instance_id, lease.token, self.store), now
                )
                self.lost(name, lease.token)
                return
            with self._mutex:
                if self.held.get(name) is current:
                    self.held[name] = replace(current, expires_at=now + self.lease_ms)
            self._renewed[name] = now
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

    def release_all(self) -> None:
        """SIGTERM: give every held lease up so a standby takes over at its next check."""
        if not self.enabled:
            return
        self.stop_keeper()
        self.released = True
        now = self.clock()
        try:
            ls.leave(self.store.writer, self.instance_id)  # peers recount at once
        except (StoreError, SQLAlchemyError) as exc:
            log.warning("cannot delete the liveness row (it will lapse): %s", exc)
        for name, lease in list(self.held.items()):
            try:
                ls.release(self.store.writer, name, self.instance_id, lease.token, now)
            except (StoreError, SQLAlchemyError) as exc:
                log.warning("%s: cannot release the lease (it will lapse): %s", name, exc)
        if self.held:
            log.info("released leases: %s", ", ".join(sorted(self.held)))
        self.held.clear()
        self._leaving.clear()

    # -- the takeover record ---------------------------------------------------------------

    def record_takeover(self, name: str, acquired: ls.Acquired) -> dict[str, Any]:
        """Apply the handoff guard to ``name``'s stored state and store the record."""
        now = self.clock()
        checkpoint, total, done = self._checkpoint(name)
        in_flight = self._in_flight(name, checkpoint)
        recovery = self._recover(name, checkpoint, in_flight)
        prev = acquired.previous
        lock_body = {
            "name": name,
            "from_owner": prev.owner if prev else None,
            "from_token": prev.token if prev else None,
            "from_expires_at": prev.expires_at if prev else None,
            "to_owner": self.instance_id,
            "to_token": acquired.lease.token,
            "acquired_at": acquired.lease.acquired_at,
            "expires_at": acquired.lease.expires_at,
            "reason": acquired.reason,
        }
        ops = frozenset(op["id"] for op in in_flight)
        has_checkpoint = checkpoint["head_hash"] is not None or checkpoint["kind"] == "source"
        state = HandoffState(
            transaction_id=name,
            steps_total=total,
            steps_completed=done,
            in_flight_observed=ops,
            checkpoint_digest=digest(checkpoint) if has_checkpoint else None,
            in_flight_registry=ops,
            lock_held=acquired.lease.token > (prev.token if prev else 0),
            remaining_idempotent=True,
            recovery=tuple(
                RecoveryOutcome(r["operation"], r["predicate"], r["outcome"], r["material"])
                for r in recovery
            ),
        )
        decision = evaluate_handoff(state)
        bodies: dict[str, dict[str, Any]] = dict(
            zip(
                HANDOFF_KINDS,
                (
                    checkpoint,
                    {"name": name, "operations": in_flight},
                    lock_body,
                    {"name": name, "checks": recovery},
                ),
                strict=True,
            )
        )
        takeover = self._takeover(name, acquired, decision, now)
        elements: dict[str, Any] = {
            **{kind: self._element(kind, body, takeover) for kind, body in bodies.items()},
            "decision": {
                "verdict": decision.verdict.value,
                "directive": decision.directive,
                "exception_applied": decision.exception_applied,
                "digest": decision.digest,
            },
        }
        values = {
            "name": name,
            "from_owner": lock_body["from_owner"],
            "from_token": lock_body["from_token"],
            "to_owner": self.instance_id,
            "to_token": acquired.lease.token,
            "reason": acquired.reason,
            "verdict": decision.verdict.value,
            "elements": elements,
            "recovery": recovery,
            "at": now,
        }
        values["id"] = ls.add_handoff(self.store.writer, values)
        return values

    def _takeover(
        self, name: str, acquired: ls.Acquired, decision: HandoffDecision, now: int
    ) -> Takeover:
        """The takeover each signed element repeats."""
        prev = acquired.previous
        chain = self.store.chain(name) if name in self.watchers else None
        return Takeover(
            name=name,
            chain_id=chain.chain_id if chain is not None else OFFCHAIN_CHAIN_ID,
            from_owner=prev.owner if prev else None,
            from_token=prev.token if prev else None,
            to_owner=self.instance_id,
            to_token=acquired.lease.token,
            reason=acquired.reason,
            at=now,
            verdict=decision.verdict.value,
            decision_digest=decision.digest,
        )

    def _element(self, kind: str, body: dict[str, Any], takeover: Takeover) -> dict[str, Any]:
        """One recorded element: its body and digest (as before) and, with a signer, the
        signed receipt, checked by the offline verifier before it is stored."""
        element: dict[str, Any] = {"kind": kind, "body": body, "digest": digest(body)}
        if self.signer is not None:
            signer = self.signer
            receipt = signer.sign(handoff_body(kind, takeover, body, signer.address, takeover.at))
            verify_receipt(receipt, trusted_signers=[signer.address])
            element["receipt"] = receipt
        return element

    def _checkpoint(self, name: str) -> tuple[dict[str, Any], int, int]:
        """The committed state of ``name``, and (steps total, steps done) for the guard."""
        t = s.settlements
        with self.store.reader.connect() as conn:
            verdicts = {
                str(v): int(n)
                for v, n in conn.execute(
                    select(t.c.verdict, func.count()).where(t.c.chain == name).group_by(t.c.verdict)
                )
            }
            watching = int(
                conn.execute(
                    select(func.count()).where(t.c.chain == name, t.c.watching.is_(True))
                ).scalar_one()
            )
            outbox = ls.max_delivery_id(conn)
        chain = self.store.chain(name)
        headers = self.store.headers(name) if name in self.watchers else []
        checkpoint: dict[str, Any] = {
            "name": name,
            "kind": "chain" if name in self.watchers else "source",
            "head_number": chain.head_number if chain else None,
            "head_hash": chain.head_hash if chain else None,
            "finalized_number": chain.finalized_number if chain else None,
            "header_window": [[n, h] for n, h, _p, _ts in headers[-16:]],
            "header_window_size": len(headers),
            "verdicts": verdicts,
            "watching": watching,
            "outbox_position": outbox,
        }
        total = sum(verdicts.values())
        return checkpoint, total, total - watching

    def _in_flight(self, name: str, checkpoint: dict[str, Any]) -> list[dict[str, Any]]:
        """Operations started and not known finished: outbox rows not acknowledged, and the
        block after the committed head (its processing may have begun, never committed)."""
        d, t, e = s.deliveries, s.settlements, s.events
        with self.store.reader.connect() as conn:
            rows = conn.execute(
                select(d.c.id, d.c.kind, d.c.state, d.c.idempotency_key, d.c.next_attempt_at)
                .where(
                    d.c.state.in_(("pending", "sending")),
                    or_(
                        d.c.settlement_id.in_(select(t.c.settlement_id).where(t.c.chain == name)),
                        d.c.event_id.in_(select(e.c.id).where(e.c.chain == name)),
                    ),
                )
                .order_by(d.c.id)
                .limit(500)
            ).all()
        ops: list[dict[str, Any]] = [
            {
                "id": f"delivery:{r.id}",
                "kind": r.kind,
                "state": r.state,
                "idempotency_key": r.idempotency_key,
                "lease_ends_at": r.next_attempt_at if r.state == "sending" else None,
            }
            for r in rows
        ]
        if checkpoint["kind"] == "chain" and checkpoint["head_number"] is not None:
            ops.append({"id": f"block:{checkpoint['head_number'] + 1}", "kind": "block_processing"})
        return ops

    def _recover(
        self, name: str, checkpoint: dict[str, Any], in_flight: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Run the recovery predicate of each in-flight operation; return what it found."""
        checks: list[dict[str, Any]] = []
        for op in in_flight:
            if op["kind"] == "block_processing":
                outcome = self._check_head(name, checkpoint)
                checks.append(
                    {
                        "operation": op["id"],
                        "predicate": "reread_header_window_from_common_ancestor",
                        "outcome": outcome,
                        "material": False,
                    }
                )
            else:
                state = op["state"]
                checks.append(
                    {
                        "operation": op["id"],
                        "predicate": "resend_with_same_idempotency_key",
                        "outcome": (
                            f"{state}: sent again with Idempotency-Key {op['idempotency_key']}"
                            + (" once its row lease ends" if state == "sending" else "")
                            + "; the receiver applies it at most once"
                        ),
                        "material": False,
                    }
                )
        return checks

    def _check_head(self, name: str, checkpoint: dict[str, Any]) -> str:
        """Compare the committed head with the node: same hash, or a reorg to re-read."""
        watcher = self.watchers.get(name)
        number, stored = checkpoint["head_number"], checkpoint["head_hash"]
        if watcher is None:
            return "not a chain"
        try:
            header = watcher.client.header(number)
        except ChainError as exc:
            return f"node not reachable ({exc}); the first poll re-reads from the stored head"
        if header is None:
            return f"block {number} not on the node: re-read from the common ancestor"
        if str(header.hash) == stored:
            return f"stored head {number} is canonical; nothing of block {number + 1} committed"
        return f"stored head {number} was reorged out: re-read from the common ancestor"


def _stale(name: str, owner: str, token: int, store: Store) -> Any:
    """The refusal of a renewal with a superseded token (recorded like a refused write)."""
    from watcher.store import StaleFencingToken

    current = next((x for x in ls.leases(store.writer) if x.name == name), None)
    return StaleFencingToken(
        name,
        owner,
        token,
        None if current is None else current.owner,
        None if current is None else current.token,
    )
