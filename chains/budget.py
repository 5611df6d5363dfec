"""How many JSON-RPC calls a chain may send: a per-chain budget and per-endpoint rate limits.

Providers bill (and throttle) by calls. Two limits keep the watcher inside what was bought:

* :class:`CallBudget` — at most ``limit`` calls in any ``window_s`` (60 s: ``calls_per_minute``)
  for the whole chain, every endpoint, batch elements counted one by one. A sliding log, not
  a token bucket: a full bucket plus its refill would allow twice the limit in one window.
  The watcher plans its polls within it (:meth:`CallBudget.refusal` before each poll); a
  call that would still go over is refused with :class:`BudgetExhausted`, so the limit
  holds even when a poll costs more than planned (a catch-up, a reorg walk, the quorum gate).
* :class:`RateLimiter` — at most ``rate`` calls per second to one endpoint (a token bucket
  with a one-second burst). A batch larger than the burst may go when the bucket is full
  and leaves a debt that later calls wait out, so the long-run rate holds.

Both count at the transport (:class:`MeteredTransport`, and ``chains.multi.TrackedTransport``
for endpoints behind failover), so the quorum gate's, receipts' and chain-id checks' calls
count like the head tracker's. Calls the limits hold back raise :class:`CallsDeferred`: not a
node failure (no circuit opens, no ``rpc_unhealthy``); the watcher waits and says why.

::

    ChainError
    └── CallsDeferred              a call was not sent: a limit of ours, not the node
        ├── BudgetExhausted        the chain's calls-per-minute budget is spent
        └── RateLimited            every endpoint is at its rate limit beyond the wait bound
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from chains.errors import ChainError
from chains.rpc import Call, RpcTransport

Monotonic = Callable[[], float]


class CallsDeferred(ChainError):
    """A call was held back by one of our own limits; the node is not at fault."""


class BudgetExhausted(CallsDeferred):
    """The chain's call budget has no room for the calls asked for."""


class RateLimited(CallsDeferred):
    """No endpoint had a free slot within the bounded wait."""


class CallBudget:
    """At most ``limit`` calls in any ``window_s`` seconds; thread-safe, clock injected.

    Also keeps what planning needs: the recent cost of one poll (moving average) and the
    polls skipped because it did not fit."""

    def __init__(self, limit: int, window_s: float = 60.0, clock: Monotonic = time.monotonic):
        if limit < 1:
            raise ValueError(f"budget must allow at least 1 call per window, got {limit}")
        if window_s <= 0:
            raise ValueError(f"budget window must be > 0 s, got {window_s}")
        self.limit = limit
        self.window_s = window_s
        self.clock = clock
        self.spent_total = 0
        """Calls sent since start (a counter)."""
        self.refused_total = 0
        """Calls refused because the window was full."""
        self.skipped_polls = 0
        """Polls not started because the estimated cost did not fit."""
        self.poll_cost = 1.0
        """Moving average of the calls one poll costs (at least 1: the head check)."""
        self._log: deque[tuple[float, int]] = deque()
        self._in_window = 0
        self._lock = threading.Lock()

    def _expire(self, now: float) -> None:
        while self._log and self._log[0][0] <= now - self.window_s:
            _, n = self._log.popleft()
            self._in_window -= n

    @property
    def spent(self) -> int:
        """Calls sent in the current window (the last ``window_s`` seconds)."""
        with self._lock:
            self._expire(self.clock())
            return self._in_window

    @property
    def remaining(self) -> int:
        """Calls that may still be sent in the current window."""
        return max(0, self.limit - self.spent)

    def spend(self, calls: int, what: str = "call") -> None:
        """Count ``calls`` about to be sent, or raise :class:`BudgetExhausted` (nothing
        counted) when they would take the window over the limit."""
        with self._lock:
            now = self.clock()
            self._expire(now)
            if self._in_window + calls > self.limit:
                self.refused_total += calls
                raise BudgetExhausted(f"{self._reason_locked(now)}; {what} not sent")
            self._log.append((now, calls))
            self._in_window += calls
            self.spent_total += calls

    def wait_s(self, calls: int = 1) -> float:
        """Seconds until ``calls`` more would fit (0 when they fit now)."""
        with self._lock:
            now = self.clock()
            self._expire(now)
            excess = self._in_window + calls - self.limit
            if excess <= 0:
                return 0.0
            freed = 0
            for at, n in self._log:
                freed += n
                if freed >= excess:
                    return max(0.0, at + self.window_s - now)
            return self.window_s

    def reason(self) -> str:
        """``RPC budget: X of Y calls used this minute`` (the words the watcher shows)."""
        with self._lock:
            now = self.clock()
            self._expire(now)
            return self._reason_locked(now)

    def _reason_locked(self, now: float) -> str:
        span = "this minute" if self.window_s == 60.0 else f"in the last {self.window_s:g} s"
        return f"RPC budget: {self._in_window} of {self.limit} calls used {span}"

    # -- planning ------------------------------------------------------------------------

    def refusal(self) -> str | None:
        """Why a poll may not start now (its estimated cost does not fit), or None."""
        need = max(1, round(self.poll_cost))
        with self._lock:
            now = self.clock()
            self._expire(now)
            if self._in_window + need <= self.limit:
                return None
            return f"{self._reason_locked(now)}; a poll costs about {need}"

    def skipped(self) -> None:
        """Count a poll skipped for want of budget."""
        with self._lock:
            self.skipped_polls += 1

    def note_poll_cost(self, calls: int) -> None:
        """Feed the cost estimate with what one poll really cost."""
        with self._lock:
            self.poll_cost = max(1.0, 0.7 * self.poll_cost + 0.3 * calls)

    def interval_s(self, poll_interval_s: float) -> float:
        """The poll interval that fits the budget: ``poll_interval_s``, stretched so that
        polls that cost one call each (the head did not move) stay within the limit."""
        return max(poll_interval_s, self.window_s / self.limit)

    def snapshot(self) -> dict[str, object]:
        """JSON-ready view (for ``GET /v1/chains``)."""
        with self._lock:
            now = self.clock()
            self._expire(now)
            return {
                "calls_per_minute": self.limit if self.window_s == 60.0 else None,
                "limit": self.limit,
                "window_s": self.window_s,
                "spent": self._in_window,
                "spent_total": self.spent_total,
                "skipped_polls": self.skipped_polls,
                "reason": self._reason_locked(now),
            }


class RateLimiter:
    """At most ``rate`` calls per second to one endpoint (token bucket, burst one second).

    Thread-safe; ``clock`` injectable. :meth:`try_acquire` never waits; :meth:`acquire`
    waits up to a bound."""

    def __init__(self, rate: float, clock: Monotonic = time.monotonic) -> None:
        if not rate > 0:
            raise ValueError(f"rate limit must be > 0 calls/s, got {rate}")
        self.rate = rate
        self.burst = max(1.0, rate)
        self.clock = clock
        self._tokens = self.burst
        self._at = clock()
        self._lock = threading.Lock()

    def _refill(self, now: float) -> None:
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now

    def try_acquire(self, calls: int = 1) -> bool:
        """Take ``calls`` slots now if free (a batch above the burst needs a full bucket)."""
        with self._lock:
            self._refill(self.clock())
            if self._tokens < min(float(calls), self.burst):
                return False
            self._tokens -= calls
            return True

    def wait_s(self, calls: int = 1) -> float:
        """Seconds until :meth:`try_acquire` of ``calls`` can succeed."""
        with self._lock:
            self._refill(self.clock())
            missing = min(float(calls), self.burst) - self._tokens
            return max(0.0, missing / self.rate)

    def acquire(self, calls: int, max_wait_s: float, label: str, endpoint: str) -> None:
        """Take ``calls`` slots, waiting for them up to ``max_wait_s``; else
        :class:`RateLimited`."""
        deadline = time.monotonic() + max_wait_s
        while not self.try_acquire(calls):
            wait = self.wait_s(calls)
            if time.monotonic() + wait > deadline:
                raise RateLimited(
                    f"{endpoint}: {label}: at its rate limit of {self.rate:g} calls/s "
                    f"(next slot in {wait:.1f} s)"
                )
            time.sleep(max(wait, 0.001))


class MeteredTransport:
    """A transport whose calls count against a :class:`CallBudget` and wait on a
    :class:`RateLimiter` (either may be None). Used for a single-endpoint chain; endpoints
    behind failover get the same from ``chains.multi.TrackedTransport``.

    :meth:`request`/:meth:`batch` wait for a rate slot; :meth:`send`/:meth:`send_batch`
    assume the caller took one (failover picks an endpoint with a free slot)."""

    def __init__(
        self,
        inner: RpcTransport,
        budget: CallBudget | None = None,
        limiter: RateLimiter | None = None,
        max_wait_s: float = 5.0,
    ) -> None:
        self.inner = inner
        self.endpoint = inner.endpoint
        self.budget = budget
        self.limiter = limiter
        self.max_wait_s = max_wait_s

    def request(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        if self.limiter is not None:
            self.limiter.acquire(1, self.max_wait_s, method, self.endpoint)
        return self.send(method, params)

    def batch(self, calls: Sequence[Call]) -> list[Mapping[str, Any]]:
        if self.limiter is not None:
            label = f"batch of {len(calls)}"
            self.limiter.acquire(len(calls), self.max_wait_s, label, self.endpoint)
        return self.send_batch(calls)

    def send(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        """One call, counted against the budget (no rate-limit wait)."""
        if self.budget is not None:
            self.budget.spend(1, method)
        return self.inner.request(method, params)

    def send_batch(self, calls: Sequence[Call]) -> list[Mapping[str, Any]]:
        """One batch, each element counted against the budget (no rate-limit wait)."""
        if self.budget is not None:
            self.budget.spend(len(calls), f"batch of {len(calls)}")
        return self.inner.batch(calls)
