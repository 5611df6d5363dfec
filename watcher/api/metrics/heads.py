"""Metrics of WebSocket head subscriptions (``heads = "ws"``), read at scrape time.

Per chain that subscribes: whether heads flow now, heads received, reconnects, fallbacks to
polling (a live subscription lost), seconds since the last head, and polls woken by a head.
Chains that only poll have no series here. Counters start at zero with the process.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from watcher.engine.heads import HeadsWaker

STATES = ("connecting", "subscribed", "backoff", "stopped")
"""Values of the ``state`` label of ``finality_heads_state``."""


def heads_metrics(waker: HeadsWaker | None) -> Iterator[Metric]:
    """Per-chain state of the head subscription (nothing when no chain uses ``heads = "ws"``)."""
    if waker is None:
        return
    subscribed = GaugeMetricFamily(
        "finality_heads_subscribed",
        "1 when new heads arrive over WebSocket, 0 while the chain is followed by polling alone",
        labels=["chain"],
    )
    state = GaugeMetricFamily(
        "finality_heads_state",
        "1 for the subscription's current state (connecting, subscribed, backoff, stopped)",
        labels=["chain", "state"],
    )
    received = CounterMetricFamily(
        "finality_heads_received", "New-head notifications received", labels=["chain"]
    )
    reconnects = CounterMetricFamily(
        "finality_heads_reconnects",
        "WebSocket connection attempts after the first",
        labels=["chain"],
    )
    fallbacks = CounterMetricFamily(
        "finality_heads_fallbacks",
        "Live subscriptions lost (each leaves the chain on interval polling until it is back)",
        labels=["chain"],
    )
    errors = CounterMetricFamily(
        "finality_heads_errors",
        "Subscription failures of any kind (refused, dropped, silent, bad frame)",
        labels=["chain"],
    )
    age = GaugeMetricFamily(
        "finality_heads_last_head_age_seconds",
        "Seconds since the last new-head notification",
        labels=["chain"],
    )
    wakes = CounterMetricFamily(
        "finality_heads_wakes", "Polls run at once because a new head arrived", labels=["chain"]
    )
    for name, sub in sorted(waker.subscriptions.items()):
        status = sub.status()
        subscribed.add_metric([name], 1.0 if status.state == "subscribed" else 0.0)
        for s in STATES:
            state.add_metric([name, s], 1.0 if status.state == s else 0.0)
        received.add_metric([name], status.heads)
        reconnects.add_metric([name], status.reconnects)
        fallbacks.add_metric([name], status.drops)
        errors.add_metric([name], status.errors)
        if status.seconds_since_last_head is not None:
            age.add_metric([name], status.seconds_since_last_head)
        wakes.add_metric([name], waker.wakes[name])
    yield from (subscribed, state, received, reconnects, fallbacks, errors, age, wakes)
