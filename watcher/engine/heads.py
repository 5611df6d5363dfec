"""Wake a chain's poller the moment the node announces a new head (``heads = "ws"``).

Polling every ``poll_interval_s`` puts, on average, half an interval between the block that
makes a settlement final and the verdict. With ``heads = "ws"`` the daemon also keeps an
``eth_subscribe("newHeads")`` open (:class:`chains.heads.HeadSubscription`) and, on every
head, runs the chain's poll at once. The head itself is only a wake-up call: the poll reads
the chain over JSON-RPC as always, so a wrong or missed notification costs latency, never
correctness.

Polling stays the fallback: the interval job is never removed, so while the WebSocket is
down (refused, dropped, silent) the chain is followed exactly as with ``heads = "poll"``,
and the subscription retries with capped exponential backoff.

Why a one-shot job rather than moving the interval job's next run: APScheduler skips a run
of a job that is still running (``max_instances = 1``), so a head arriving during a poll
would be lost until the next interval. A one-shot job per wake (at most one queued per
chain; the flag is cleared when it starts, so a head that arrives during it queues the
next) runs :meth:`watcher.app.chains.ChainRunner.poll`, whose per-chain lock serialises it
with the interval job: a wake is never lost and never runs concurrently with another poll
of the same chain. It runs in the scheduler, so shutdown waits for it like for any poll.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from apscheduler.schedulers import SchedulerNotRunningError

from chains.heads import HeadSubscription, NewHead
from chains.health import redact
from chains.registry import known_chain
from watcher.components import HasComponents, first_of
from watcher.config.chains import ChainConfig

if TYPE_CHECKING:
    from apscheduler.schedulers.base import BaseScheduler

log = logging.getLogger("finality.heads")

SILENCE_BLOCKS = 10
"""A subscription with no head for this many block times is presumed dead and redialed."""

SILENCE_MIN_S = 30.0
"""...but never sooner than this (fast chains have bursts of slow blocks)."""

MIN_BACKOFF_S = 0.25
"""First wait before redialing a failed subscription; doubles per failure."""

MAX_BACKOFF_S = 10.0
"""Longest wait between redials (polling covers the gap meanwhile)."""


def silence_for(chain: ChainConfig) -> float:
    """Seconds without a head after which ``chain``'s subscription is redialed: a multiple of
    the block time (the registry's, else the poll interval), at least :data:`SILENCE_MIN_S`."""
    known = known_chain(chain.chain_id)
    block_time = known.block_time_s if known is not None else chain.resolved_poll_interval_s
    return max(SILENCE_MIN_S, SILENCE_BLOCKS * block_time)


class HeadsWaker:
    """The daemon component: one :class:`HeadSubscription` per ``heads = "ws"`` chain."""

    def __init__(
        self,
        chains: list[ChainConfig],
        poll: Callable[[str], object],
        scheduler: BaseScheduler,
        stopping: threading.Event,
    ) -> None:
        """``poll`` is the daemon's per-chain poll (under the chain's lock), run in a one-shot
        ``scheduler`` job per wake; none is queued once ``stopping`` is set."""
        self.poll = poll
        self.scheduler = scheduler
        self.stopping = stopping
        self.chains = {c.name: c for c in chains}
        self.subscriptions: dict[str, HeadSubscription] = {}
        self.wakes: Counter[str] = Counter()
        """Polls run because a head arrived, by chain."""
        self._wakes_lock = threading.Lock()
        self._queued: dict[str, threading.Event] = {}
        self._failing: dict[str, int] = {}
        for chain in chains:
            url = chain.resolved_heads_url
            assert url is not None, "config validation guarantees a ws URL for heads = 'ws'"
            name = chain.name
            self._queued[name] = threading.Event()
            self._failing[name] = 0
            self.subscriptions[name] = HeadSubscription(
                url,
                lambda head, name=name: self._on_head(name, head),  # type: ignore[misc]
                silence_s=silence_for(chain),
                min_backoff_s=MIN_BACKOFF_S,
                max_backoff_s=MAX_BACKOFF_S,
                name=f"heads-{name}",
                on_error=lambda reason, name=name: self._on_error(name, reason),  # type: ignore[misc]
            )

    # -- Component -----------------------------------------------------------------------

    def start(self) -> None:
        for name, sub in self.subscriptions.items():
            sub.start()
            log.info("chain %s: new heads over %s", name, redact(sub.url))

    def after_poll(self, chain: str) -> None:
        del chain  # nothing to do after a poll: the wake-ups come from the node

    def stop(self) -> None:
        for sub in self.subscriptions.values():
            sub.stop()

    # -- wake-ups ------------------------------------------------------------------------

    def _on_head(self, name: str, head: NewHead) -> None:
        """In the subscription's thread: queue one poll of ``name`` unless one is queued."""
        if self._failing[name]:
            log.info("chain %s: new heads over WebSocket are back (head %d)", name, head.number)
            self._failing[name] = 0
        queued = self._queued[name]
        if queued.is_set() or self.stopping.is_set():
            return
        queued.set()
        try:
            self.scheduler.add_job(
                self._wake,
                args=[name],
                name=f"wake:{name}",
                misfire_grace_time=None,
            )
        except SchedulerNotRunningError:
            queued.clear()  # shutting down (or not started): the interval job is all there is

    def _wake(self, name: str) -> None:
        """In a scheduler thread: the poll a head asked for (after any poll in progress)."""
        self._queued[name].clear()  # a head from now on queues another poll
        with self._wakes_lock:
            self.wakes[name] += 1
        self.poll(name)

    def _on_error(self, name: str, reason: str) -> None:
        self._failing[name] += 1
        n = self._failing[name]
        if n == 1 or n % 50 == 0:
            interval = self.chains[name].resolved_poll_interval_s
            log.warning(
                "chain %s: new heads over WebSocket unavailable (%s, failure #%d); "
                "polling every %g s until it is back",
                name,
                self._redacted(name, reason),
                n,
                interval,
            )

    # -- reporting -----------------------------------------------------------------------

    def _redacted(self, name: str, text: str) -> str:
        url = self.subscriptions[name].url
        return text.replace(url, redact(url))

    def report(self, name: str) -> dict[str, Any] | None:
        """JSON-ready state of ``name``'s subscription; None when it polls only."""
        sub = self.subscriptions.get(name)
        if sub is None:
            return None
        status = sub.status()
        return {
            "mode": "ws",
            "url": redact(status.url),
            "state": status.state,
            "subscribed": status.state == "subscribed",
            "heads_received": status.heads,
            "reconnects": status.reconnects,
            "fallbacks": status.drops,
            "errors": status.errors,
            "last_error": None
            if status.last_error is None
            else self._redacted(name, status.last_error),
            "last_head_number": status.last_head_number,
            "seconds_since_last_head": status.seconds_since_last_head,
            "wakes": self.wakes[name],
        }


def waker_of(parts: HasComponents) -> HeadsWaker | None:
    """The daemon's heads component, if any chain subscribes."""
    return first_of(parts, HeadsWaker)


def heads_report(parts: HasComponents, name: str) -> dict[str, Any]:
    """What ``GET /v1/chains`` shows under ``heads`` for chain ``name``."""
    waker = waker_of(parts)
    report = None if waker is None else waker.report(name)
    return report if report is not None else {"mode": "poll"}
