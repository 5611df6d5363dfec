"""What the API may know of a chain: a frozen snapshot the runner publishes after each poll.

An engine's fields move inside its poll thread while routes answer on the API's threads; a
route that read them directly could see a head half-moved or an index mid-update, and every
field a route touched was one the engine could never rename. So the poll job copies what the
routes show into a :class:`ChainStatus` once it has run (polled, failed, or skipped because
another instance holds the chain) and puts it on the :class:`StatusBoard`; the API reads the
board and never an engine object. :func:`status_of` is the one place that reads an engine,
and only its public attributes: ``head``, ``safe_number``, ``lagging``, ``index``, ``polls``,
``deferred`` and ``finality_seconds``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from chains.budget import CallBudget
from chains.models import BlockHeader

Histogram = tuple[tuple[tuple[str, float], ...], float]
"""Cumulative ``(le, count)`` pairs ending with ``+Inf``, and the sum (Prometheus' shape)."""


@dataclass
class PollHealth:
    """How a chain's poll jobs went (kept by the runner, copied into each snapshot)."""

    last_success_ms: int | None = None
    """When the last poll succeeded (None: none has yet)."""
    last_error: str | None = None
    """Why the last poll failed (None after a success)."""
    consecutive_errors: int = 0
    """Failed polls since the last success."""
    started: bool = False
    """Whether the chain's start-up check passed and its state was loaded."""


@dataclass(frozen=True)
class ChainStatus:
    """One chain as the API shows it, as of the end of its last poll job."""

    chain: str
    """Configured name."""
    head_number: int | None = None
    """The engine's head (None before the first block is read)."""
    head_timestamp: int | None = None
    """That head's timestamp (s), for the head's age in ``/metrics``."""
    safe_number: int | None = None
    """The ``safe`` tag's height as the engine last read it (None: not read)."""
    lagging: bool = False
    """Whether the engine is behind the node by more than one poll's worth of blocks."""
    watched: int = 0
    """Settlements the engine follows."""
    polls: int = 0
    """Polls the engine has run in this process."""
    deferred: str | None = None
    """Why the last poll waited for its call budget (None: it did not)."""
    finality_seconds: Histogram = ((("+Inf", 0.0),), 0.0)
    """Inclusion-to-finality seconds of this process's confirmations."""
    health: PollHealth = field(default_factory=PollHealth)
    """How the poll jobs went (a copy: the runner's own record keeps moving)."""
    poll_interval_s: float = 1.0
    """The chain's poll interval, stretched by its call budget if needed."""

    def healthy(self, now_ms: int, standby: bool) -> bool:
        """Whether the chain polled successfully of late; a ``standby`` (another instance
        holds the chain's lease) is healthy: it is ready to take over."""
        if standby:
            return True
        h = self.health
        if h.last_success_ms is None or h.last_error is not None:
            return False
        return now_ms - h.last_success_ms <= 5 * self.poll_interval_s * 1000 + 10_000


class Watched(Protocol):
    """The watch index as the snapshot reads it: how many settlements it holds."""

    @property
    def by_id(self) -> Mapping[str, object]: ...


class Observed(Protocol):
    """A histogram the engine fills."""

    def snapshot(self) -> tuple[list[tuple[str, float]], float]: ...


class Engine(Protocol):
    """The public face of a chain's engine that :func:`status_of` reads (nothing else)."""

    @property
    def head(self) -> BlockHeader | None: ...
    @property
    def safe_number(self) -> int | None: ...
    @property
    def lagging(self) -> bool: ...
    @property
    def index(self) -> Watched: ...
    @property
    def polls(self) -> int: ...
    @property
    def deferred(self) -> str | None: ...
    @property
    def finality_seconds(self) -> Observed: ...


def status_of(name: str, engine: Engine, health: PollHealth, poll_interval_s: float) -> ChainStatus:
    """The snapshot of chain ``name`` now (called in its poll thread, under its lock)."""
    head = engine.head
    buckets, total = engine.finality_seconds.snapshot()
    return ChainStatus(
        chain=name,
        head_number=None if head is None else head.number,
        head_timestamp=None if head is None else head.timestamp,
        safe_number=engine.safe_number,
        lagging=engine.lagging,
        watched=len(engine.index.by_id),
        polls=engine.polls,
        deferred=engine.deferred,
        finality_seconds=(tuple(buckets), total),
        health=PollHealth(
            health.last_success_ms, health.last_error, health.consecutive_errors, health.started
        ),
        poll_interval_s=poll_interval_s,
    )


def budget_json(budget: CallBudget | None, status: ChainStatus) -> dict[str, object] | None:
    """A chain's budget and spend, and why polls wait if they do (``GET /v1/chains``);
    None without a budget."""
    if budget is None:
        return None
    report = budget.snapshot()
    report["poll_interval_s"] = status.poll_interval_s
    report["waiting"] = status.deferred
    return report


class StatusBoard:
    """The latest :class:`ChainStatus` of each chain (thread-safe: one poll thread per
    chain publishes, any thread reads)."""

    def __init__(self, chains: Iterable[str]) -> None:
        self._lock = threading.Lock()
        self._latest = {name: ChainStatus(chain=name) for name in chains}

    def publish(self, status: ChainStatus) -> None:
        """Make ``status`` its chain's latest."""
        with self._lock:
            self._latest[status.chain] = status

    def get(self, chain: str) -> ChainStatus:
        """The latest snapshot of ``chain`` (an empty one before its first publish);
        raises ``KeyError`` for a chain that is not configured."""
        with self._lock:
            return self._latest[chain]

    def all(self) -> dict[str, ChainStatus]:
        """Every chain's latest snapshot, by name, in configuration order."""
        with self._lock:
            return dict(self._latest)
