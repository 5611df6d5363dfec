"""Health of one JSON-RPC endpoint, and the circuit breaker that keeps a bad one out.

A chain is read through several endpoints. Each has an :class:`EndpointHealth` that every
call through it updates: latency (moving average), errors, the head it last showed, and a
circuit breaker. The breaker's states:

* ``closed`` — in use;
* ``open`` — failed ``failure_threshold`` times in a row: skipped until a backoff
  (doubling per consecutive opening, capped) has passed;
* ``half_open`` — the backoff passed: the next call is a probe; success closes the
  circuit, failure opens it again for longer.

A node may also be ``wrong_chain`` (its ``eth_chainId`` is not the configured one): it is
never used until it answers with the right chain id again; or ``stalled`` (it answers, but
its head stopped moving while another endpoint's went on): it is left for a backoff like an
open circuit, then checked again and used once it has caught up; or ``forked`` (it answers,
but its chain cannot be joined to the one we follow: no block of our header window is on it,
while another endpoint's chain joins): it is left for a backoff too, and only the head
tracker, which holds the window, can tell when it is back on our chain; or ``inconsistent``
(an answer failed a check: a header that does not re-hash, receipts or txs that do not
rebuild the header's roots, a tx that is not the one asked for): nothing it says is believed
for a backoff (doubling per inconsistency, capped), then it is tried again. Health is bookkeeping
only: the failover transport (chains.multi) decides with it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from chains.redact import redact_url

Monotonic = Callable[[], float]


@dataclass
class EndpointHealth:
    """What we know of one endpoint; updated by every call through it."""

    endpoint: str
    """The endpoint's URL."""
    weight: float = 1.0
    """Relative preference among healthy endpoints (higher is tried first)."""
    failure_threshold: int = 3
    """Consecutive failures that open the circuit."""
    base_backoff_s: float = 1.0
    """First open period; doubles with each consecutive opening."""
    max_backoff_s: float = 30.0
    """Longest open period."""
    clock: Monotonic = time.monotonic
    """Monotonic seconds (injectable for unit tests)."""
    calls: int = 0
    """Calls made through this endpoint."""
    errors: int = 0
    """Calls that failed (no answer, bad answer, server-side JSON-RPC error)."""
    consecutive_failures: int = 0
    """Failures since the last success."""
    latency_ms: float | None = None
    """Exponential moving average of answer time."""
    last_error: str | None = None
    """The last failure, for humans."""
    head: int | None = None
    """The highest head this endpoint reported (``None`` until seen)."""
    wrong_chain: int | None = None
    """The chain id the endpoint answered with, when it is not ours."""
    openings: int = 0
    """Consecutive openings of the circuit (drives the backoff)."""
    open_until: float = 0.0
    """Monotonic time until which the circuit stays open."""
    rate_limit: float | None = None
    """Most calls per second sent to this endpoint (``rpc_rate_limits``); None: no limit."""
    head_at: float | None = None
    """Monotonic time ``head`` last went up (``None`` until a head is seen)."""
    head_seen_at: float | None = None
    """Monotonic time the endpoint last reported its head (moved or not)."""
    stalled: str | None = None
    """Why the endpoint is left as stalled (its head froze while another's moved), else None."""
    stall_openings: int = 0
    """Consecutive stalls without catching up (drives the stall backoff)."""
    stalled_until: float = 0.0
    """Monotonic time until which a stalled endpoint is not used nor checked again."""
    forked: str | None = None
    """Why the endpoint is left as forked (its chain does not join the one followed), else
    None. Uses the stall backoff: ``stalled`` holds the same reason while it is set."""
    inconsistent: str | None = None
    """The last check the endpoint's data failed, else None (kept for views after its
    backoff ends)."""
    inconsistencies: int = 0
    """Times its data failed a check (drives the backoff)."""
    inconsistent_until: float = 0.0
    """Monotonic time until which an inconsistent endpoint is not used."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def circuit(self) -> str:
        """The circuit breaker alone: ``closed``, ``open`` or ``half_open``."""
        if self.openings == 0:
            return "closed"
        return "open" if self.clock() < self.open_until else "half_open"

    @property
    def state(self) -> str:
        """``closed``, ``open``, ``half_open``, ``wrong_chain``, ``inconsistent``, ``forked``
        or ``stalled``."""
        if self.wrong_chain is not None:
            return "wrong_chain"
        if self.distrusted:
            return "inconsistent"
        if self.forked is not None:
            return "forked"
        if self.stalled is not None:
            return "stalled"
        return self.circuit

    @property
    def usable(self) -> bool:
        """True when a call may be sent (closed, or half-open for a probe; a stalled endpoint
        once its stall backoff has passed, as a last resort until it is checked again)."""
        if self.wrong_chain is not None or self.circuit == "open" or self.distrusted:
            return False
        return self.stalled is None or self.stall_due

    @property
    def stall_due(self) -> bool:
        """True when the endpoint is stalled and its stall backoff has passed: check it."""
        return self.stalled is not None and self.clock() >= self.stalled_until

    @property
    def distrusted(self) -> bool:
        """True while the endpoint is left as inconsistent (its backoff has not passed)."""
        return self.inconsistent is not None and self.clock() < self.inconsistent_until

    def mark_inconsistent(self, reason: str) -> None:
        """Its data failed a check: not used for a backoff (doubling, capped like the
        circuit's), then tried again; a failed check then marks it again, for longer."""
        with self._lock:
            self.inconsistent = reason
            self.last_error = reason
            self.errors += 1
            self.inconsistencies += 1
            backoff = min(self.max_backoff_s, self.base_backoff_s * 2 ** (self.inconsistencies - 1))
            self.inconsistent_until = self.clock() + backoff

    def head_age_s(self) -> float | None:
        """Seconds since ``head`` last went up; None before any head."""
        return None if self.head_at is None else self.clock() - self.head_at

    def frozen_for_s(self) -> float | None:
        """How long the endpoint was *seen* at the same head: from when its head last went up
        to when it last reported it (a head not asked for lately is no evidence of a stall);
        None before any head."""
        if self.head_at is None or self.head_seen_at is None:
            return None
        return self.head_seen_at - self.head_at

    def stall(self, reason: str) -> None:
        """Leave the endpoint as stalled for a backoff (doubling per consecutive stall, capped
        like the circuit's): it answers, but its head is behind a moving one."""
        with self._lock:
            self.stalled = reason
            self.stall_openings += 1
            backoff = min(self.max_backoff_s, self.base_backoff_s * 2 ** (self.stall_openings - 1))
            self.stalled_until = self.clock() + backoff

    def fork(self, reason: str) -> None:
        """Leave the endpoint as forked for a backoff (the stall backoff): its chain cannot be
        joined to ours. Only :meth:`unfork` (the tracker found our chain there) ends it."""
        self.stall(reason)
        with self._lock:
            self.forked = reason

    def unfork(self) -> None:
        """The endpoint's chain joins ours again: usable again."""
        with self._lock:
            self.forked = None
        self.unstall()

    def unstall(self) -> None:
        """The endpoint caught up: usable again, its stall backoff reset."""
        with self._lock:
            if self.forked is not None:
                return  # caught up in height proves nothing about the branch
            self.stalled = None
            self.stall_openings = 0
            self.stalled_until = 0.0

    @property
    def error_rate(self) -> float:
        """Errors over calls, 0 before any call."""
        return self.errors / self.calls if self.calls else 0.0

    def success(self, elapsed_s: float) -> None:
        """A good answer came back after ``elapsed_s``."""
        with self._lock:
            self.calls += 1
            ms = elapsed_s * 1000
            self.latency_ms = ms if self.latency_ms is None else 0.8 * self.latency_ms + 0.2 * ms
            self.consecutive_failures = 0
            self.openings = 0
            self.open_until = 0.0

    def failure(self, reason: str) -> None:
        """A call failed; may open (or re-open) the circuit."""
        with self._lock:
            self.calls += 1
            self.errors += 1
            self.last_error = reason
            self.consecutive_failures += 1
            half_open = self.openings > 0 and self.clock() >= self.open_until
            if half_open or self.consecutive_failures >= self.failure_threshold:
                self.openings += 1
                backoff = min(self.max_backoff_s, self.base_backoff_s * 2 ** (self.openings - 1))
                self.open_until = self.clock() + backoff

    def trip(self, reason: str) -> None:
        """Open the circuit now, whatever the failure count: the endpoint answered, but with
        something no healthy node says (its head went backwards)."""
        with self._lock:
            self.calls += 1
            self.errors += 1
            self.last_error = reason
            self.consecutive_failures += 1
            self.openings += 1
            backoff = min(self.max_backoff_s, self.base_backoff_s * 2 ** (self.openings - 1))
            self.open_until = self.clock() + backoff

    def saw_head(self, number: int) -> bool:
        """Record the head this endpoint reported; False when it is below the highest this
        endpoint showed before (it went backwards: resyncing, or a stale replica behind a
        load balancer), which the caller counts as a failure, not as a reorg."""
        with self._lock:
            if self.head is not None and number < self.head:
                return False
            now = self.clock()
            if self.head is None or number > self.head:
                self.head_at = now
            self.head_seen_at = now
            self.head = number
            return True

    def snapshot(self, best_head: int | None) -> dict[str, object]:
        """A JSON-ready view, with head lag measured against ``best_head``."""
        lag = None
        if best_head is not None and self.head is not None:
            lag = max(0, best_head - self.head)
        return {
            "endpoint": self.endpoint,
            "state": self.state,
            "weight": self.weight,
            "calls": self.calls,
            "errors": self.errors,
            "error_rate": round(self.error_rate, 4),
            "latency_ms": None if self.latency_ms is None else round(self.latency_ms, 2),
            "head": self.head,
            "head_lag": lag,
            "last_error": self.last_error,
            "stalled": self.stalled,
            "forked": self.forked,
            "inconsistent": self.inconsistent,
            "rate_limit": self.rate_limit,
        }


def why_unused(entry: Mapping[str, object]) -> str:
    """Why an endpoint of a health report (:meth:`EndpointHealth.snapshot`) is not used, in
    its state's own words (what failed a check, why it was left, its last error)."""
    state = entry.get("state")
    reason = (
        (entry.get("inconsistent") if state == "inconsistent" else None)
        or entry.get("forked")
        or entry.get("stalled")
        or entry.get("last_error")
        or state
    )
    return str(reason)


def redact(url: str) -> str:
    """An endpoint URL safe to show (metrics labels, logs): :func:`chains.redact.redact_url`,
    the project's one redaction (scheme, host and port only)."""
    return redact_url(url)
