"""The outbox sender: delivers commits, discards, provisional updates and alert webhooks.

The engine writes outbox rows in the same transaction as the verdict (see
:mod:`watcher.delivery.plan`); this component works them off. One *dispatcher* thread claims
due rows (a safe claim: see :mod:`watcher.store.outbox_store`) and hands them to
``[delivery] workers`` threads, each with its own keep-alive HTTP client. A row is claimed
with a lease before its request goes out, so a ``kill -9`` mid-request leaves a row that is
due again once the lease ends, and is resent with the same ``Idempotency-Key``.

For one row, a worker:

1. assembles the body if it has none yet (a commit or discard waits for its signed receipt,
   for as long as it takes; a ``finality_violation`` for the signed revocation of the
   receipt it withdraws, at most ``receipt_wait_s``, then it goes without and says why) and
   stores it, so every retry
   sends the same bytes; a commit a finality violation superseded (renamed
   ``fw:<settlement>:commit~<event>`` by :mod:`watcher.delivery.plan`) is never sent again:
   if its attempt in flight failed, its next claim cancels it;
2. POSTs it, signed (:mod:`watcher.delivery.format`), the whole attempt within
   ``timeout_s`` and at most a few KiB of the answer read (:mod:`watcher.delivery.outbound`);
3. reports the outcome, which the dispatcher records in batches: delivered on 2xx;
   otherwise due again after an exponential backoff with jitter, capped at
   ``backoff_max_s``; dead after ``max_attempts`` (replay it with
   ``finality deliveries replay ID`` or ``POST /v1/deliveries/{id}/replay``). The cap is
   also checked at every claim, so an attempt that never reported (its lease ran out)
   cannot be followed by more than the cap allows.

One destination (scheme, host and port) gets at most ``max_per_destination`` attempts at
once: a slow receiver, or one with a large backlog, holds that many workers and no more,
so other callers' deliveries go out meanwhile; rows over the limit are given back, due a
moment later (:data:`HELD_BACK_MS`), without counting as an attempt.

Delivery is at least once on the wire and exactly once in effect for a receiver that
dedupes by ``Idempotency-Key`` (``docs/delivery.md``).

``log`` alert channels are not outbox rows: the dispatcher tails the events table and writes
one JSON line per matching event to the ``finality.alerts`` logger.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
from collections import Counter
from collections.abc import Sequence

import httpx

from chains.redact import redact_text
from watcher import otel_tracing
from watcher.clock import Clock, wall_clock_ms
from watcher.config.sections import AlertChannelConfig, DeliveryConfig
from watcher.delivery.bodies import BodyAssembler
from watcher.delivery.format import body_bytes, headers
from watcher.delivery.log_channel import EventLog
from watcher.delivery.outbound import AttemptDeadline, AttemptLoop, post_checked
from watcher.delivery.plan import commit_key
from watcher.destinations import (
    AllowList,
    DestinationRefused,
    Resolver,
    Unresolvable,
    destination_of,
    resolve,
)
from watcher.store.errors import StoreError
from watcher.store.outbox_store import (
    CANCELLED,
    DEAD,
    DELIVERED,
    PENDING,
    DeliveryRecord,
    Outcome,
)
from watcher.store.store import Store

log = logging.getLogger("finality.delivery")

IDLE_S = 1.0
"""Longest the dispatcher sleeps when nothing is due (new rows also wake it at once)."""

AHEAD = 4
"""Rows claimed ahead per worker, so workers never wait for the dispatcher."""

HELD_BACK_MS = 250
"""How long a row whose destination is at its limit waits before it is claimed again."""


def backoff_ms(attempts: int, initial_s: float, max_s: float, rng: random.Random) -> int:
    """Delay before the next attempt: ``initial * 2**(attempts-1)``, capped, times a jitter
    in [0.5, 1) so that many rows failing together do not retry in lock step."""
    base = min(max_s, initial_s * 2 ** min(max(attempts - 1, 0), 60))
    return max(1, int(base * rng.uniform(0.5, 1.0) * 1000))


class Sender:
    """The delivery component (see the module doc)."""

    def __init__(
        self,
        store: Store,
        config: DeliveryConfig,
        clock: Clock = wall_clock_ms,
        log_channels: Sequence[AlertChannelConfig] = (),
        seed: int | None = None,
        destinations: AllowList | None = None,
        resolver: Resolver = resolve,
        idle_s: float = IDLE_S,
    ) -> None:
        self.store = store
        self.idle_s = idle_s  # the dispatcher's longest sleep: :data:`IDLE_S` (longer in a test)
        self.destinations = destinations or AllowList()
        """Where rows may go besides public addresses (``Config.destinations()``), checked
        again at every attempt (watcher/delivery/outbound.py)."""
        self.resolver = resolver
        self.outbox = store.outbox()
        self.config = config
        self.clock = clock
        self.event_log = EventLog(store, log_channels)
        self.bodies = BodyAssembler(store, config.receipt_wait_s)
        self.lease_ms = int(((AHEAD + 1) * config.timeout_s + 2) * 1000)
        """A claim's lease: the attempts queued ahead of it and its own, each within its
        deadline of ``timeout_s``, and a margin; past it the row is sent again."""
        self.outcomes: Counter[tuple[str, str]] = Counter()
        """Attempts by (channel, outcome): delivered, retry, dead, superseded, waiting,
        cancelled."""
        self.wake = threading.Event()
        self._stopping = threading.Event()
        self._queue: queue.Queue[DeliveryRecord | None] = queue.Queue()
        self._results: queue.Queue[Outcome] = queue.Queue()
        self._in_flight = 0
        self._busy: Counter[str] = Counter()
        """Attempts queued or running per destination (:func:`destination_of`)."""
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._threads: list[threading.Thread] = []
        self.seen_changes = -1  # Outbox.changes when the dispatcher last began to look

    # -- component -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the dispatcher and the workers."""
        if not self.config.secret:
            log.warning(
                "[delivery] secret is not set: deliveries go out WITHOUT signature headers "
                "(webhook-signature), and receivers cannot authenticate them"
            )
        self._stopping.clear()
        self._threads = [
            threading.Thread(target=self._dispatch, name="delivery-dispatch", daemon=True)
        ]
        self._threads += [
            threading.Thread(target=self._work, name=f"delivery-{i}", daemon=True)
            for i in range(self.config.workers)
        ]
        for thread in self._threads:
            thread.start()

    def after_poll(self, chain: str) -> None:
        """Look now, not at the next idle tick, if the outbox changed since the dispatcher
        last looked (:attr:`Outbox.changes`) or log channels tail the events: an idle poll
        enqueues nothing, and a claim after each was a write transaction for nothing."""
        if self.event_log.channels or self.outbox.changes != self.seen_changes:
            self.wake.set()

    def stop(self) -> None:
        """Stop claiming, let requests in progress finish (bounded by the timeout), record
        their outcomes; rows claimed but not started are given back."""
        self._stopping.set()
        for _ in range(self.config.workers):
            self._queue.put(None)
        dispatcher, workers = self._threads[:1], self._threads[1:]
        for thread in workers:
            thread.join(timeout=self.config.timeout_s + 2)
        self.wake.set()
        for thread in dispatcher:
            thread.join(timeout=5)
        self._threads = []
        try:
            self._record()
        except StoreError as exc:
            log.warning("delivery: outcomes not recorded at stop (resent after lease): %s", exc)

    # -- dispatcher ----------------------------------------------------------------------

    def _dispatch(self) -> None:
        """Record finished attempts, claim due rows for the workers, sleep until next due.

        This thread is the sender's only writer besides body assembly: outcomes are written
        in batches and claims are made for at least a worker's worth of rows at once, so on
        SQLite a delivery costs a fraction of a commit instead of writers queueing on the
        lock. Up to four rows per worker are claimed ahead, so workers never wait for it.
        A crash between a 2xx answer and its recording resends the row after its lease,
        under the same Idempotency-Key: the receiver's dedupe absorbs it."""
        workers = self.config.workers
        capacity = AHEAD * workers
        while not self._stopping.is_set():
            self.wake.clear()
            self.seen_changes = self.outbox.changes  # before the claim: it sees them all
            wait = self.idle_s
            try:
                self._record()
                self.event_log.tick()
                with self._lock:
                    free = capacity - self._in_flight
                if free >= workers:
                    now = self.clock()
                    claimed = self.outbox.claim_within(
                        now, free, self.lease_ms, self.config.max_attempts
                    )
                    for rec in claimed.buried:
                        self._count(rec, "dead")
                        self._log_dead(rec, rec.last_error)
                    rows = claimed.rows
                    with self._lock:
                        self._in_flight += len(rows)
                    for row in rows:
                        self._hand_out(row, now)
                    if len(rows) == free:
                        continue  # there may be more due right now
                    due_at = self.outbox.next_due_at(now)
                    if due_at is not None:
                        wait = min(self.idle_s, max(0.005, (due_at - self.clock()) / 1000))
            except StoreError as exc:
                log.warning("delivery: store unavailable, retrying in %.0f s: %s", self.idle_s, exc)
            self.wake.wait(wait)

    def _hand_out(self, rec: DeliveryRecord, now: int) -> None:
        """Queue ``rec`` for a worker, or give it back if its destination is at its limit."""
        where = destination_of(rec.url)
        with self._lock:
            busy = self._busy[where] >= self.config.max_per_destination
            if not busy:
                self._busy[where] += 1
        if busy:
            later = now + HELD_BACK_MS
            self._results.put(Outcome(rec, PENDING, now, due_at=later, attempted=False))
        else:
            self._queue.put(rec)

    def _release(self, rec: DeliveryRecord) -> None:
        """``rec``'s attempt is over: its destination has room for one more."""
        where = destination_of(rec.url)
        with self._lock:
            self._busy[where] -= 1
            if self._busy[where] <= 0:
                del self._busy[where]  # many destinations come and go: keep only busy ones

    def _record(self) -> None:
        """Write the outcomes the workers reported, in one transaction."""
        batch: list[Outcome] = []
        while True:
            try:
                batch.append(self._results.get_nowait())
            except queue.Empty:
                break
        if not batch:
            return
        try:
            done = self.outbox.finish(batch)
        finally:
            with self._lock:
                self._in_flight -= len(batch)
        for outcome, ok in zip(batch, done, strict=True):
            self._count(outcome.rec, self._label(outcome) if ok else "superseded")
            if ok and outcome.state == DEAD:
                self._log_dead(outcome.rec, outcome.error)

    @staticmethod
    def _log_dead(rec: DeliveryRecord, error: str | None) -> None:
        log.warning(
            "delivery %d (%s %s to %s) is dead after %d attempts: %s; replay it with "
            "`finality deliveries replay %d`",
            *(rec.id, rec.channel, rec.kind, rec.url, rec.attempts, error, rec.id),
        )

    @staticmethod
    def _label(outcome: Outcome) -> str:
        if outcome.state == CANCELLED:
            return "cancelled"
        if not outcome.attempted:
            return "waiting"
        return {DELIVERED: "delivered", DEAD: "dead"}.get(outcome.state, "retry")

    # -- workers -------------------------------------------------------------------------

    def _work(self) -> None:
        with AttemptLoop(self.config.timeout_s) as attempts:
            while True:
                rec = self._queue.get()
                if rec is None:
                    return
                try:
                    if self._stopping.is_set():
                        now = self.clock()
                        outcome = Outcome(rec, PENDING, now, due_at=now, attempted=False)
                    else:
                        outcome = self.deliver(rec, attempts)
                except Exception as exc:
                    # The row stays "sending": it is due again when its lease ends.
                    if isinstance(exc, StoreError):
                        log.warning("delivery %d: store error, will retry: %s", rec.id, exc)
                    else:
                        log.exception("delivery %d: unexpected error, will retry", rec.id)
                    with self._lock:
                        self._in_flight -= 1
                else:
                    self._results.put(outcome)
                finally:
                    self._release(rec)
                self.wake.set()

    def deliver(self, rec: DeliveryRecord, attempts: AttemptLoop) -> Outcome:
        """One attempt of a claimed row: the outcome to record (by the dispatcher)."""
        now = self.clock()
        if rec.kind == "commit" and rec.idempotency_key != commit_key(rec.settlement_id or ""):
            # Superseded by a finality violation while its attempt was in flight, and that
            # attempt failed: its finality is gone, it must not go out again.
            log.warning("delivery %d: commit superseded by a finality violation: cancelled", rec.id)
            return Outcome(rec, CANCELLED, now, due_at=now, attempted=False)
        if rec.body is None:
            try:
                body = self.bodies.assemble(rec, now)
            except ValueError as exc:  # nothing to build it from: retrying cannot help
                return Outcome(rec, DEAD, now, None, f"cannot assemble the body: {exc}")
            if body is None:
                retry = self.bodies.look_again_at(rec, now)
                return Outcome(rec, PENDING, now, due_at=retry, attempted=False)
            rec = self.outbox.set_body(rec, body, now)
        assert rec.body is not None
        attributes: otel_tracing.Attributes = {  # ids only: the URL may carry a token
            "finality.delivery_id": rec.id,
            "finality.settlement_id": rec.settlement_id or "",
            "finality.delivery_kind": rec.kind,
            "finality.channel": rec.channel,
            "finality.attempt": rec.attempts,
        }
        with otel_tracing.span("finality.delivery", attributes) as current:
            outcome = self._send(rec, attempts)
            if current is not None and outcome.status:
                current.set_attribute("http.status_code", outcome.status)
        return outcome

    def _send(self, rec: DeliveryRecord, attempts: AttemptLoop) -> Outcome:
        """The request of one attempt of ``rec`` (its body assembled), and its outcome."""
        assert rec.body is not None
        data = body_bytes(rec.body)
        sent = self.clock()
        signed = headers(rec, data, self.config.secret, sent // 1000)
        try:
            status = attempts.run(
                post_checked(
                    attempts.clients, rec.url, self.destinations, data, signed, self.resolver
                )
            )
        except Unresolvable as exc:  # DNS may come back: an ordinary failed attempt
            return self._failed(rec, None, f"destination: {exc}")
        except DestinationRefused as exc:  # nothing was sent, and retrying cannot help
            return Outcome(rec, DEAD, self.clock(), None, f"destination refused: {exc}")
        except (httpx.HTTPError, AttemptDeadline) as exc:
            error = redact_text(f"{type(exc).__name__}: {exc}".rstrip(": "), [rec.url])
            return self._failed(rec, None, error)
        if 200 <= status < 300:
            return Outcome(rec, DELIVERED, self.clock(), status=status)
        # The status only: the answer's body is never stored or shown (a destination's
        # words would make the outbox a way to read what answers at an address).
        return self._failed(rec, status, f"HTTP {status}")

    def _failed(self, rec: DeliveryRecord, status: int | None, error: str) -> Outcome:
        now = self.clock()
        if rec.attempts >= self.config.max_attempts:
            return Outcome(rec, DEAD, now, status, error)
        delay = backoff_ms(
            rec.attempts, self.config.backoff_initial_s, self.config.backoff_max_s, self._rng
        )
        if rec.attempts in (1, 3) or rec.attempts % 10 == 0:
            log.info(
                "delivery %d to %s failed (attempt %d): %s; retry in %.1f s",
                *(rec.id, rec.url, rec.attempts, error, delay / 1000),
            )
        return Outcome(rec, PENDING, now, status, error, now + delay)

    def _count(self, rec: DeliveryRecord, outcome: str) -> None:
        with self._lock:
            self.outcomes[(rec.channel, outcome)] += 1

    # -- introspection -------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Rows claimed by this sender whose outcome is not recorded yet."""
        with self._lock:
            return self._in_flight
