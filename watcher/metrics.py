"""What a part of the daemon counts in memory for the metrics: a thread-safe histogram.

The Prometheus collector that reads everything at scrape time is served by the API
(:mod:`watcher.api.metrics.collector`); the parts that observe (the chain engine) keep
their :class:`Buckets` here, below them all.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence


class Buckets:
    """A cumulative histogram kept in memory (thread-safe): what the engine observes."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self._counts = [0] * (len(self.bounds) + 1)
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        """Count one observation."""
        with self._lock:
            self._counts[bisect.bisect_left(self.bounds, value)] += 1
            self._sum += value

    def snapshot(self) -> tuple[list[tuple[str, float]], float]:
        """Cumulative ``(le, count)`` pairs ending with ``+Inf``, and the sum."""
        with self._lock:
            counts, total = list(self._counts), self._sum
        out, running = [], 0
        for bound, n in zip((*map(str, self.bounds), "+Inf"), counts, strict=True):
            running += n
            out.append((bound, float(running)))
        return out, total
