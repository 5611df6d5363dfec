"""Polls that land just after the node has the next block (``heads = "poll"``).

A chain that makes a block every ``poll_interval_s`` and a poll job every ``poll_interval_s``
keep the same phase for hours: whatever offset the daemon happened to start with, between
0 and one whole interval, sits between every block and the poll that sees it, and so
between the depth-N block and the verdict (measured in ``bench.receipts_cost``: 0.00 s in
one run, 0.45 s in the next, at a block every 0.5 s). Polling more often pays a call per
extra poll on every block; a WebSocket (``heads = "ws"``) needs an endpoint that has one.

The pacer moves the phase instead, from what each poll found, at about the cost of the
interval. Once the chain is *regular* (:data:`REGULAR` scheduled polls in a row each found
exactly one new block, so the blocks come at the poll interval) it *searches*: after every
poll that still found its block the next one moves :data:`SEARCH_STEPS` steps earlier (the
block was there already, so it came earlier still). A poll that then finds nothing was
early: it is retried a step later but not past the phase that found the last block, then
once a step past that phase (a block a little late); found, the phase stays there
(*settled*, at most a step after the block comes). Settled, it probes half a step earlier
every :data:`PROBE_EVERY` polls at first (at the next poll again while a probe still finds
its block), so the phase closes in to within half a step and a drifting block time is
followed. A probe that finds nothing costs a retry and shows the phase at the block's edge
already, and so does a settled poll that finds nothing because its block came late
(jitter): either doubles the gap to the next probe, up to :data:`PROBE_EVERY_MAX` polls; a
probe that finds its block (a drift) halves it. Retries are paid from a budget of one in
:data:`RETRY_SHARE` polls (:data:`RETRY_BURST` at once): the bound on what pacing costs,
whatever the jitter (about 1.03 calls per block); over it, an empty poll is not retried and
the next one, on the interval, comes a step later. On a steady chain the settled state costs a
few calls in a hundred blocks (``bench.pacing``, "once settled"). One poll that found two
blocks (run late: a busy machine delays a scheduled run) keeps the phase; two in a row mean
faster blocks, and the search starts over. Nothing a step past the phase that found the
last block means a missed slot or a stalled chain: that phase goes on an interval later,
and the chain must be regular again before anything moves. An idle or irregular chain (a development node mining on demand, a poll interval
far from the block time) is polled on its interval and costs almost no extra call.

Only the interval job's next run is moved: a poll reads the chain over JSON-RPC as always,
so a poll at the wrong moment costs latency, never correctness. Chains with a
``calls_per_minute`` budget (their interval is the budget's) and chains with
``poll_pacing = false`` are not paced.

A chain woken by WebSocket heads (``heads = "ws"``) polls at every head already, so its
interval job is only the fallback for a subscription gone quiet: while heads wake polls it
would find nothing but pay a call each block. Every woken poll therefore moves the
interval job's next run to :data:`WS_FALLBACK_INTERVALS` intervals after it
(:meth:`PollPacing.after_wake`): with heads arriving, no interval poll runs at all; with
none for that long, the interval job polls on its interval as before.

Times are milliseconds of the daemon's injected clock (the ``Clock`` of ``watcher.clock``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Protocol

from watcher.clock import Clock
from watcher.config.chains import ChainConfig

REGULAR = 4
"""Scheduled polls in a row that each found exactly one new block before the phase moves."""

SEARCH_STEPS = 2
"""Searching, a poll that still found its block moves the next this many steps earlier: the
interval is crossed in at most :data:`STEP_FRACTION` / this many polls."""

PROBE_EVERY = 8
"""Settled, polls between two probes half a step earlier at first (the next poll probes
again while a probe still finds its block)."""

PROBE_EVERY_MAX = 64
"""Most polls between two probes: each probe that finds nothing (the phase is at the
block's edge already), and each settled poll that finds nothing (its block came late),
doubles the gap up to this; one that finds its block (the blocks came earlier: a drift)
halves it, down to :data:`PROBE_EVERY`. Settled on a steady chain, probing
then costs about one call in this many blocks instead of one in :data:`PROBE_EVERY`."""

RETRY_SHARE = 32
"""At most one extra poll (a retry: of a probe, a search or a late block) per this many
polls over any long run, plus :data:`RETRY_BURST`: the documented bound of what pacing costs,
about 1.03 calls per block. Over it, an empty poll is not retried: the next poll, on the
interval and a step later, finds the block (a whole interval late at worst)."""

RETRY_BURST = 4
"""Retries that may be spent at once (a search at the start; a few late blocks in a row):
the budget starts full and refills by one every :data:`RETRY_SHARE` polls up to this."""

STEP_FRACTION = 8
"""The step is the interval over this (clamped to :data:`STEP_MIN_MS`..:data:`STEP_MAX_MS`):
a settled poll comes at most a step after its block (half a step once probed)."""

STEP_MIN_MS = 20
"""Below this, the scheduler's own wake-up jitter is the step."""

STEP_MAX_MS = 1_000
"""Above this, a block time of several seconds would be searched too coarsely."""


WS_FALLBACK_INTERVALS = 2
"""A chain woken by WebSocket heads: its interval poll runs only this many intervals after
the last woken poll (a head a whole interval late, or a subscription gone quiet)."""


def poll_job_id(chain: str) -> str:
    """The scheduler id of ``chain``'s interval poll job."""
    return f"poll:{chain}"


class PollPacer:
    """One chain's phase search (see the module doc): told what each poll of the interval
    job found, it says when the next should run instead of the interval's schedule."""

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self.step_ms = min(max(interval_ms // STEP_FRACTION, STEP_MIN_MS), STEP_MAX_MS)
        """The unit of a move: a search moves :data:`SEARCH_STEPS` of them, a settled probe
        half of one, a retry at most one."""
        self.streak = 0
        """Scheduled polls in a row that found exactly one new block."""
        self.settled = False
        """Whether an empty poll found the block's edge since the chain became regular."""
        self._since_probe = 0
        self.probe_every = PROBE_EVERY
        """Polls between two probes now (:data:`PROBE_EVERY`..:data:`PROBE_EVERY_MAX`)."""
        self._probing = False
        """Whether the poll in flight is a probe (moved half a step earlier)."""
        self._caught_up = False
        """Whether the last poll, settled, found two blocks or more (one is forgiven)."""
        self._found_ms: int | None = None
        """When the last poll that found its block ran: the phase known to be late enough."""
        self._due_ms: int | None = None
        """While retrying an empty poll: that phase in the retry's interval."""
        self.moves = 0
        """Polls moved (searches, probes and retries): for ``GET /v1/chains``."""
        self._budget = float(RETRY_BURST)
        """Retries that may be spent now (see :data:`RETRY_SHARE`)."""
        self.retries = 0
        """Extra polls after an empty one: the calls pacing cost."""
        self._expected_ms: int | None = None
        """When the poll in flight was meant to run (the last answer, or the schedule)."""

    def after_poll(self, at_ms: int, blocks: int | None, next_ms: int) -> int | None:
        """A poll started at ``at_ms`` found ``blocks`` new blocks (None: it did not run or
        failed), and the interval would run the next at ``next_ms``: the time to run it
        instead, or None to keep the schedule."""
        expected = self._expected_ms
        late = expected is not None and at_ms - expected > self.step_ms
        moved = self._after(at_ms, blocks, next_ms, expected if late else None)
        self._expected_ms = next_ms if moved is None else moved
        return moved

    def _after(
        self, at_ms: int, blocks: int | None, next_ms: int, intended: int | None
    ) -> int | None:
        """:meth:`after_poll`; ``intended``: when the poll was meant to run, if the scheduler
        started it more than a step late (a busy machine, or a poll before it that overran):
        what it found then says nothing about the phase, which stays where it was meant."""
        probed, self._probing = self._probing, False
        self._budget = min(float(RETRY_BURST), self._budget + 1 / RETRY_SHARE)
        if blocks is None:
            self._reset()
            return None
        if self._due_ms is not None:
            return self._after_retry(at_ms, blocks, self._due_ms, intended, next_ms)
        if blocks == 1:
            self._caught_up = False
            if probed:  # the block came earlier than the phase: probe more often
                self.probe_every = max(PROBE_EVERY, self.probe_every // 2)
            self._found_ms = at_ms if intended is None else intended
            self.streak += 1
            self._since_probe += 1
            if self.streak < REGULAR or (self.settled and self._since_probe < self.probe_every):
                return self._anchored(intended, at_ms, next_ms)
            if self._budget < 1:  # no retry left to pay for a move that finds nothing
                return self._anchored(intended, at_ms, next_ms)
            # A probe that found its block was late by half a step or more: probe again
            # at once (a block time a little shorter than the interval is followed).
            self._since_probe = self.probe_every - 1 if self.settled else 0
            self._probing = self.settled
            move = self.step_ms // 2 if self.settled else SEARCH_STEPS * self.step_ms
            base = next_ms if intended is None else self._phase_after(intended, at_ms)
            return self._moved(base - move)
        if blocks > 1 and intended is not None:
            # Started late, it found the block it was meant for and the next: the phase stays.
            return self._anchored(intended, at_ms, next_ms)
        if blocks == 0 and self.streak >= REGULAR and self._found_ms is not None:
            if self.settled:
                # At the block's edge already (a probe), or a block came late (jitter): probe
                # less often, so that the probes do not pull the phase back into the jitter.
                self.probe_every = min(2 * self.probe_every, PROBE_EVERY_MAX)
                self._since_probe = 0
            # Early (the phase was moved before the block), or the block is late: retried
            # (see _retry_at), in this interval of the phase that found the last one.
            behind = max(1, -(-(at_ms - self._found_ms) // self.interval_ms))
            if self._budget < 1:  # over the budget: the next poll, a step later, finds it
                self._caught_up = False
                return self._moved(next_ms + self.step_ms)
            self._due_ms = self._found_ms + behind * self.interval_ms
            return self._retry_at(at_ms, self._due_ms)
        if blocks > 1 and self.settled and self.streak >= PROBE_EVERY and not self._caught_up:
            # Settled for a while, one poll that found two blocks ran late (a busy machine
            # delays a run) or follows a block that came late: the phase stays; a second
            # one in a row means faster blocks, and the search starts over.
            self._caught_up = True
            return None
        self._reset()  # two blocks or more (late, or faster blocks), or an irregular chain
        return None

    def _after_retry(
        self, at_ms: int, blocks: int, due_ms: int, intended: int | None, next_ms: int
    ) -> int | None:
        """The retry of an empty poll found ``blocks``: settled here if it found its block
        (where it was meant to run, if it ran late); else retried again, or, a step past the
        phase that found the last one, a missed slot (or a stall): that phase again an
        interval on, the chain regular again first."""
        if blocks == 1:
            self._due_ms, self._found_ms = None, at_ms if intended is None else intended
            self.settled, self._since_probe = True, 0
            return self._anchored(intended, at_ms, next_ms)
        if blocks == 0 and at_ms < due_ms + self.step_ms and self._budget >= 1:
            return self._retry_at(at_ms, due_ms)
        self._due_ms, self.streak = None, 0
        if blocks != 0:
            self._reset()
            return None
        return self._moved(due_ms + self.interval_ms)

    def _retry_at(self, at_ms: int, due_ms: int) -> int:
        """The next retry after an empty poll at ``at_ms``: a step later, but first at
        ``due_ms``, the phase that found the last block; past it, a step later (a block a
        little late), and then no more."""
        self.retries += 1
        self._budget -= 1
        if at_ms < due_ms:
            return self._moved(min(at_ms + self.step_ms, due_ms))
        return self._moved(due_ms + self.step_ms)

    def _phase_after(self, intended: int, at_ms: int) -> int:
        """The first time after ``at_ms`` in the phase of ``intended`` (whole intervals on)."""
        return intended + ((at_ms - intended) // self.interval_ms + 1) * self.interval_ms

    def _anchored(self, intended: int | None, at_ms: int, next_ms: int) -> int | None:
        """After a poll started late (``intended`` not None), the next one in the phase it was
        meant for, not an interval after its late start (where the trigger puts it after a
        moved run); None when that is the schedule already."""
        if intended is None:
            return None
        phase = self._phase_after(intended, at_ms)
        return None if abs(next_ms - phase) <= self.step_ms // 2 else self._moved(phase)

    def _moved(self, at_ms: int) -> int:
        self.moves += 1
        return at_ms

    def _reset(self) -> None:
        self.streak, self.settled, self._since_probe, self._due_ms = 0, False, 0, None
        self.probe_every, self._probing, self._caught_up = PROBE_EVERY, False, False


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
        self.woken_ms: Mapping[str, int] = {
            c.name: WS_FALLBACK_INTERVALS * round(c.resolved_poll_interval_s * 1000)
            for c in chains
            if c.heads == "ws"
        }
        """Per chain woken by heads: how long after a woken poll its interval poll waits."""
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

        def paced(scheduled: int) -> int | None:
            moved = pacer.after_poll(at_ms, blocks, scheduled)
            return None if moved is None else max(moved, self.clock() + 1)

        self._move(name, paced)

    def woken(self, poll: Callable[[str], object]) -> Callable[[str], None]:
        """``poll`` as the poll a head asks for: the interval poll waits after it."""

        def woken_poll(name: str) -> None:
            at = self.clock()
            poll(name)
            self.after_wake(name, at)

        return woken_poll

    def after_wake(self, name: str, at_ms: int) -> None:
        """A poll woken by a head of ``name`` started at ``at_ms``: the interval poll waits
        (see the module doc), never earlier than it was due."""
        wait = self.woken_ms.get(name)
        if wait is None:
            return
        self._move(name, lambda scheduled: max(at_ms + wait, scheduled))

    def _move(self, name: str, when: Callable[[int], int | None]) -> None:
        """Move ``name``'s next poll to ``when(scheduled_ms)`` (None or the same time: it
        stays), under the lock and never after :meth:`close`."""
        with self._lock:
            if self._closed:
                return
            job = self.jobs.get_job(poll_job_id(name))
            if job is None or job.next_run_time is None:
                return
            scheduled = round(job.next_run_time.timestamp() * 1000)
            moved = when(scheduled)
            if moved is not None and moved != scheduled:
                job.modify(next_run_time=datetime.fromtimestamp(moved / 1000, UTC))

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
