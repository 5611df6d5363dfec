"""The sources component: polls every configured source's watched settlements.

One APScheduler job per source (``source:<name>``, every ``poll_interval_s``) on the
daemon's scheduler. A poll:

1. lists the source's watched settlements (one indexed query);
2. asks the source about up to :data:`MAX_FETCH_PER_POLL` of them, outside any store
   transaction (an HTTP call must never hold the SQLite write lock), continuing where the
   previous poll stopped so that every settlement gets its turn;
3. decides all of them in **one** store transaction (``store.block_txn(source, now)``), each
   re-read inside it and merged with its stored evidence (:mod:`.record`).

A source that cannot be asked (:class:`~guard.source.SourceUnavailable`) ends the poll early:
what was fetched is decided, the rest waits for the next poll, and nothing is concluded from
silence (as for a chain whose node is down). The error is kept in :attr:`SourceSlot.health`
and logged at the 1st, 10th and every 100th consecutive failure.

Webhooks (watcher/api/sources.py, through :mod:`watcher.sources.inbox`) go through
:meth:`SourcePoller.receive`: the same lock, the same transaction shape, so a webhook and a
poll of the same source never interleave their decisions in this process.

A confirmed settlement of a *reversible* source (``source.reversible``; Stripe: refunds,
disputes) stays watched for ``late_watch_s`` after it became final, so that polling still
sees a reversal and raises the finality violation; webhooks report one at any time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from guard.settlement import SettlementPolicy, evidence_from_json
from guard.source import SettlementSource, Snapshot, SourceUnavailable
from guard.types import UnixMillis
from watcher.clock import Clock, wall_clock_ms
from watcher.config.sources import SourceConfig
from watcher.delivery.plan import OutboxPlan
from watcher.sources.record import record_observation
from watcher.sources.registry import build_source
from watcher.store import SettlementRecord, Store, StoreError, WatchEntry

log = logging.getLogger("finality.sources")

MAX_FETCH_PER_POLL = 200
"""Most settlements one poll of a source asks about (the rest: next polls, in turn)."""


@dataclass
class SourceHealth:
    """How the last polls of a source went (for logs, ``/healthz`` and tests)."""

    last_success_ms: int | None = None
    """End of the last poll that asked everything it meant to."""
    last_error: str | None = None
    """Why the last poll failed (None after a success)."""
    consecutive_errors: int = 0
    """Failed polls in a row."""
    polls: int = 0
    """Polls run."""


@dataclass
class SourceSlot:
    """One configured source and what the component keeps about it."""

    config: SourceConfig
    """Its ``[[sources]]`` table."""
    source: SettlementSource
    """The adapter."""
    policy: SettlementPolicy
    """The operator's limits for its settlements."""
    health: SourceHealth = field(default_factory=SourceHealth)
    """How its polls go."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Serialises its decisions (poll and webhooks) within this process."""
    cursor: int = 0
    """``seq`` of the last settlement asked about: the next poll starts after it."""

    @property
    def late_watch_ms(self) -> int:
        """How long a timed-out (or reversible confirmed) settlement is still watched."""
        return int(self.config.late_watch_s * 1000)


class SourcePoller:
    """The component (see the module doc)."""

    def __init__(
        self,
        store: Store,
        configs: Sequence[SourceConfig],
        plan: OutboxPlan | None = None,
        clock: Clock = wall_clock_ms,
        scheduler: Any = None,
        notify: Sequence[Callable[[str], None]] = (),
        sources: Mapping[str, SettlementSource] | None = None,
        owns: Callable[[str], bool] = lambda _name: True,
        fence_of: Callable[[str], tuple[str, int] | None] = lambda _name: None,
    ) -> None:
        self.store = store
        self.plan = plan or OutboxPlan()
        """Which outbox rows a decision produces (the delivery component's alert routes)."""
        self.clock = clock
        self.scheduler = scheduler
        """The daemon's APScheduler (None: poll by calling :meth:`poll`)."""
        self.notify = list(notify)
        """Called with the source name after a poll or webhook stored something (wakes the
        delivery sender, so a commit goes out now rather than at its next idle tick)."""
        self.owns = owns
        """Whether this instance holds the source's lease (the handoff manager's answer;
        polls of a source another instance holds are skipped, like a chain's)."""
        self.fence_of = fence_of
        """(owner, fencing token) the source's writes carry; None: unfenced (one instance)."""
        given = dict(sources or {})
        self.slots: dict[str, SourceSlot] = {
            c.name: SourceSlot(
                c,
                given.get(c.name) or build_source(c),
                SettlementPolicy(max_wait_ms=int(c.max_wait_s * 1000)),
            )
            for c in configs
        }

    # -- component -----------------------------------------------------------------------

    def start(self) -> None:
        """Add one polling job per source to the scheduler, first run now."""
        if self.scheduler is None:
            return
        for name, slot in self.slots.items():
            self.scheduler.add_job(
                self.poll_job,
                "interval",
                seconds=slot.config.poll_interval_s,
                args=[name],
                id=_job_id(name),
                max_instances=1,
                coalesce=True,
                misfire_grace_time=None,
                next_run_time=datetime.now(UTC),
                replace_existing=True,
            )

    def after_poll(self, chain: str) -> None:
        """Chain polls concern no source."""

    def stop(self) -> None:
        """Release the sources' connections (the scheduler is already stopped)."""
        for slot in self.slots.values():
            slot.source.close()

    def kick(self, name: str) -> None:
        """Poll ``name`` as soon as possible (a settlement was just registered)."""
        if self.scheduler is None or not getattr(self.scheduler, "running", False):
            return
        job = self.scheduler.get_job(_job_id(name))
        if job is not None:
            job.modify(next_run_time=datetime.now(UTC))

    # -- polling -------------------------------------------------------------------------

    def poll_job(self, name: str) -> None:
        """The scheduled job: :meth:`poll`, with failures recorded and logged, never raised."""
        health = self.slots[name].health
        if not self.owns(name):
            return
        try:
            self.poll(name)
        except (SourceUnavailable, StoreError) as exc:
            health.last_error = str(exc)
            health.consecutive_errors += 1
            n = health.consecutive_errors
            if n in (1, 10) or n % 100 == 0:
                log.warning("source %s: poll failed (error #%d): %s", name, n, exc)
        else:
            if health.consecutive_errors:
                log.info("source %s: answers again", name)
            health.last_error = None
            health.consecutive_errors = 0
            health.last_success_ms = self.clock()

    def poll(self, name: str) -> int:
        """One poll of source ``name`` (see the module doc); returns the decisions stored.

        Raises :class:`SourceUnavailable` after deciding what was fetched before the
        source failed, and the store's errors."""
        slot = self.slots[name]
        slot.health.polls += 1
        entries = self.store.watch_entries(name)
        if not entries:
            return 0
        batch = _in_turn(entries, slot.cursor, MAX_FETCH_PER_POLL)
        snapshots: dict[str, Snapshot | None] = {}
        fetched: dict[str, Snapshot | None] = {}  # by ref: several callers' settlements of one
        failure: SourceUnavailable | None = None
        for entry in batch:
            if entry.tx_hash not in fetched:
                try:
                    fetched[entry.tx_hash] = slot.source.fetch(
                        entry.tx_hash, UnixMillis(self.clock())
                    )
                except SourceUnavailable as exc:
                    failure = exc
                    break
            snapshots[entry.settlement_id] = fetched[entry.tx_hash]
            slot.cursor = entry.seq
        stored = len(self.apply(name, snapshots)) if snapshots else 0
        if failure is not None:
            raise failure
        return stored

    def receive(self, name: str, ref: str, snapshot: Snapshot) -> SettlementRecord | None:
        """Decide the settlements of ``ref`` (one per caller that registered it) on a
        snapshot pushed by the source (a webhook).

        Returns the first registered as stored afterwards, or None when nobody registered
        ``ref`` with this source. Works whether or not a settlement is still watched: a
        refund months after finality is still a finality violation."""
        recs = self.store.settlements_of_tx(name, ref)
        if not recs:
            return None
        pushed: dict[str, Snapshot | None] = {r.settlement_id: snapshot for r in recs}
        self.apply(name, pushed, only_watched=False)
        return self.store.settlement(recs[0].settlement_id)

    def apply(
        self, name: str, snapshots: Mapping[str, Snapshot | None], only_watched: bool = True
    ) -> list[str]:
        """Observe and decide the given settlements in one store transaction; returns the
        ids whose stored decision changed."""
        slot = self.slots[name]
        changed: list[str] = []
        with slot.lock:
            now = self.clock()
            with self.store.block_txn(name, now, self.fence_of(name)) as txn:
                for rec in txn.by_ids(list(snapshots)):
                    if only_watched and not rec.watching:
                        continue  # decided meanwhile (a webhook): nothing to poll for
                    previous = evidence_from_json(rec.decision.get("evidence"))
                    obs = slot.source.observe(
                        rec.tx_hash, snapshots[rec.settlement_id], previous, UnixMillis(now)
                    )
                    reversal_watch_ms = slot.late_watch_ms if slot.source.reversible else 0
                    if record_observation(
                        txn,
                        rec,
                        obs,
                        slot.policy,
                        slot.late_watch_ms,
                        self.plan,
                        now,
                        reversal_watch_ms,
                    ):
                        changed.append(rec.settlement_id)
        if changed:
            for wake in self.notify:
                wake(name)
        return changed

    # -- introspection -------------------------------------------------------------------

    def healthy(self, name: str) -> bool:
        """A source is healthy when its last poll asked everything it meant to, recently."""
        slot = self.slots[name]
        health = slot.health
        if health.last_success_ms is None or health.last_error is not None:
            return False
        interval_ms = slot.config.poll_interval_s * 1000
        return self.clock() - health.last_success_ms <= 5 * interval_ms + 10_000


def _job_id(name: str) -> str:
    return f"source:{name}"


def _in_turn(entries: list[WatchEntry], after_seq: int, limit: int) -> list[WatchEntry]:
    """Up to ``limit`` entries, starting after ``after_seq`` and wrapping around."""
    later = [e for e in entries if e.seq > after_seq]
    earlier = [e for e in entries if e.seq <= after_seq]
    return (later + earlier)[:limit]


class _Daemon(Protocol):
    """Anything that lists its components (the daemon's App does)."""

    @property
    def components(self) -> Sequence[object]: ...


def sources_of(daemon: _Daemon) -> SourcePoller | None:
    """The daemon's sources component, if it has one."""
    return next((c for c in daemon.components if isinstance(c, SourcePoller)), None)
