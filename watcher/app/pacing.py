"""Polls that land just after the node has the next block (``heads = "poll"``).

A chain that makes a block every ``poll_interval_s`` and a poll job every ``poll_interval_s``
keep the same phase for hours: whatever offset the daemon happened to start with, between
0 and one whole interval, sits between every block and the poll that sees it, and so
between the depth-N block and the verdict (measured in ``bench.receipts_cost``: 0.00 s in
one run, 0.45 s in the next, at a block every 0.5 s). Polling more often pays a call per
extra poll on every block; a WebSocket (``heads = "ws"``) needs an endpoint that has one.

The pacer moves the phase instead, from what each poll found, at about the cost of the
interval: once the chain is *regular* (:data:`REGULAR` scheduled polls in a row each found
exactly one new block, so the blocks come at the poll interval), it moves the next poll one
:attr:`PollPacer.step_ms` earlier after every poll that still found its block (*searching*:
the block was there already, so it came earlier still). A poll that finds nothing once the
chain is regular was early: it is tried again one step later (one extra call), and the
phase stays there (*settled*, at most a step after the block comes). Settled, it probes one
step earlier again every :data:`PROBE_EVERY` polls, so a drifting block time is followed;
each probe that finds nothing costs one extra call, about one call in ten. A second empty
poll in a row (a missed slot, a stalled chain) goes back to the schedule the interval had,
and the chain must be regular again before anything moves: an idle or irregular chain (a
development node mining on demand, a poll interval far below the block time) is polled on
its interval and never costs an extra call.

Only the interval job's next run is moved: a poll reads the chain over JSON-RPC as always,
so a poll at the wrong moment costs latency, never correctness. Chains with a
``calls_per_minute`` budget (their interval is the budget's), chains woken by WebSocket
heads and chains with ``poll_pacing = false`` are not paced.

Times are milliseconds of the daemon's injected clock (the ``Clock`` of ``watcher.clock``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Protocol

from watcher.clock import Clock
from watcher.config.chains import ChainConfig

REGULAR = 4
"""Scheduled polls in a row that each found exactly one new block before the phase moves."""

PROBE_EVERY = 8
"""Settled, polls between two probes one step earlier."""

STEP_FRACTION = 8
"""The step is the interval over this (clamped to :data:`STEP_MIN_MS`..:data:`STEP_MAX_MS`):
a settled poll comes at most a step after its block; a search crosses the interval in
at most this many polls."""

STEP_MIN_MS = 20
"""Below this, the scheduler's own wake-up jitter is the step."""

STEP_MAX_MS = 1_000
"""Above this, a block time of several seconds would be searched too coarsely."""


def poll_job_id(chain: str) -> str:
    """The scheduler id of ``chain``'s interval poll job."""
    return f"poll:{chain}"


class PollPacer:
    """One chain's phase search (see the module doc): told what each poll of the interval
    job found, it says when the next should run instead of the interval's schedule."""

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self.step_ms = min(max(interval_ms // STEP_FRACTION, STEP_MIN_MS), STEP_MAX_MS)
        """How far one move shifts the phase."""
        self.streak = 0
        """Scheduled polls in a row that found exactly one new block."""
        self.settled = False
        """Whether an empty poll found the block's edge since the chain became regular."""
        self._since_probe = 0
        self._resume_ms: int | None = None
        """While a retry is pending: the run the interval had scheduled, resumed if the
        retry finds nothing either."""
        self.moves = 0
        """Polls moved (searches, probes and retries): for ``GET /v1/chains``."""
        self.retries = 0
        """Extra polls after an empty one: the calls pacing cost."""

    def after_poll(self, at_ms: int, blocks: int | None, next_ms: int) -> int | None:
        """A poll started at ``at_ms`` found ``blocks`` new blocks (None: it did not run or
        failed), and the interval would run the next at ``next_ms``: the time to run it
        instead, or None to keep the schedule."""
        if blocks is None:
            self._reset()
            return None
        if self._resume_ms is not None:  # this poll was the retry of an empty one
            resume, self._resume_ms = self._resume_ms, None
            if blocks == 1:  # the block came within the step: the phase stays here
                self.settled, self._since_probe = True, 0
                return None
            self._reset()  # a missed slot or a stall: back to the interval's schedule
            return self._moved(resume) if blocks == 0 else None
        if blocks == 1:
            self.streak += 1
            self._since_probe += 1
            if self.streak < REGULAR or (self.settled and self._since_probe < PROBE_EVERY):
                return None
            self._since_probe = 0
            return self._moved(next_ms - self.step_ms)
        if blocks == 0 and self.streak >= REGULAR:  # early: try again one step later
            self._resume_ms = next_ms
            self.retries += 1
            return self._moved(at_ms + self.step_ms)
        self._reset()  # two blocks or more (late, or faster blocks), or an irregular chain
        return None

    def _moved(self, at_ms: int) -> int:
        self.moves += 1
        return at_ms

    def _reset(self) -> None:
        self.streak, self.settled, self._since_probe, self._resume_ms = 0, False, 0, None


class PollJobs(Protocol):
    """The part of APScheduler's scheduler the pacing uses."""

    def get_job(self, job_id: str) -> _Job | None: ...


class _Job(Protocol):
    next_run_time: datetime | None

    def modify(self, **changes: object) -> object: ...


class PollPacing:
    """The pacers of the chains that poll on their own interval, moving their poll jobs."""

    def __init__(self, chains: Iterable[ChainConfig], jobs: PollJobs, clock: Clock) -> None:
        self.pacers: Mapping[str, PollPacer] = {
            c.name: PollPacer(round(c.resolved_poll_interval_s * 1000))
            for c in chains
            if c.poll_pacing and c.heads == "poll" and c.calls_per_minute is None
        }
        self.jobs = jobs
        self.clock = clock
        self._lock = threading.Lock()
        self._closed = False

    def close(self) -> None:
        """No job is moved from now on; call before the scheduler shuts down. APScheduler's
        ``shutdown(wait=True)`` holds its job-store lock while it waits for running jobs, so
        a poll job asking for that lock at its end would wait for ever (and the shutdown with
        it): a poll moves its job only under this lock, and after ``close`` not at all."""
        with self._lock:
            self._closed = True

    def after_poll(self, name: str, at_ms: int, blocks: int | None) -> None:
        """Move ``name``'s next poll if its pacer says so (never into the past)."""
        pacer = self.pacers.get(name)
        if pacer is None:
            return
        with self._lock:
            if self._closed:
                return
            job = self.jobs.get_job(poll_job_id(name))
            if job is None or job.next_run_time is None:
                return
            scheduled = round(job.next_run_time.timestamp() * 1000)
            moved = pacer.after_poll(at_ms, blocks, scheduled)
            if moved is not None:
                when = max(moved, self.clock() + 1)
                job.modify(next_run_time=datetime.fromtimestamp(when / 1000, UTC))

    def report(self, name: str) -> dict[str, object] | None:
        """What ``GET /v1/chains`` says of the chain's pacing (None: not paced)."""
        pacer = self.pacers.get(name)
        if pacer is None:
            return None
        return {
            "step_ms": pacer.step_ms,
            "regular": pacer.streak >= REGULAR,
            "settled": pacer.settled,
            "moves": pacer.moves,
            "extra_polls": pacer.retries,
        }
