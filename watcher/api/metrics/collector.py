"""Prometheus metrics, read from the daemon's parts at scrape time (nothing to keep in sync).

Counts that the store holds (settlements by verdict, reorgs by depth, deliveries by state,
the outbox backlog) are queried at scrape time, so they survive restarts and agree between
instances. What only a process sees (RPC calls, delivery attempts, the inclusion → finality
time) is kept in memory by the part that sees it and starts at zero with the process, as
Prometheus counters do.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from chains import pool
from chains.health import redact
from watcher.api.deps import ApiDeps
from watcher.api.metrics.budget import budget_metrics
from watcher.api.metrics.heads import heads_metrics

REORG_DEPTH_BUCKETS = (1, 2, 3, 5, 10, 20, 50, 100)
"""Upper bounds of the reorg depth histogram (blocks)."""


def _histogram(counts: dict[int, int]) -> tuple[list[tuple[str, float]], float]:
    """Cumulative buckets over depth → count."""
    out = []
    for bound in REORG_DEPTH_BUCKETS:
        out.append((str(bound), float(sum(n for d, n in counts.items() if d <= bound))))
    out.append(("+Inf", float(sum(counts.values()))))
    return out, float(sum(d * n for d, n in counts.items()))


class ServiceCollector(Collector):
    """Head, lag, polls, RPC calls and errors, settlements by verdict, reorgs, deliveries."""

    def __init__(self, deps: ApiDeps) -> None:
        self.deps = deps

    def collect(self) -> Iterator[Metric]:
        yield from self._chains()
        yield from self._store()
        yield from self._delivery()
        yield from self._receipts()
        yield from heads_metrics(self.deps.heads)
        yield from budget_metrics(self.deps.budgets)

    def _chains(self) -> Iterator[Metric]:
        svc = self.deps
        head = GaugeMetricFamily("finality_head_block", "Last processed head", labels=["chain"])
        lag = GaugeMetricFamily(
            "finality_head_lag_seconds",
            "Seconds since the last processed head's timestamp",
            labels=["chain"],
        )
        healthy = GaugeMetricFamily(
            "finality_chain_healthy", "1 when polling works", labels=["chain"]
        )
        polls = CounterMetricFamily("finality_polls", "Polls run", labels=["chain"])
        calls = CounterMetricFamily(
            "finality_rpc_calls", "JSON-RPC calls", labels=["chain", "method"]
        )
        errors = CounterMetricFamily(
            "finality_rpc_errors", "Failed JSON-RPC calls", labels=["chain", "method"]
        )
        by_outcome = CounterMetricFamily(
            "finality_rpc_requests",
            "JSON-RPC calls by method and outcome (ok or error)",
            labels=["chain", "method", "outcome"],
        )
        watched = GaugeMetricFamily(
            "finality_watched_settlements", "Settlements followed", labels=["chain"]
        )
        latency = HistogramMetricFamily(
            "finality_inclusion_to_finality_seconds",
            "From the inclusion block's timestamp to FINALITY_CONFIRMED (this process)",
            labels=["chain"],
        )
        now_s = svc.clock() / 1000
        for name, status in svc.board.all().items():
            if status.head_number is not None and status.head_timestamp is not None:
                head.add_metric([name], status.head_number)
                lag.add_metric([name], max(0.0, now_s - status.head_timestamp))
            healthy.add_metric([name], 1.0 if svc.healthy(name) else 0.0)
            polls.add_metric([name], status.polls)
            watched.add_metric([name], status.watched)
            client = svc.clients[name]
            calls_now, errors_now = dict(client.calls), dict(client.errors)
            for method, n in sorted(calls_now.items()):
                calls.add_metric([name, method], n)
                failed = errors_now.get(method, 0)
                by_outcome.add_metric([name, method, "ok"], max(0, n - failed))
                by_outcome.add_metric([name, method, "error"], failed)
            for method, n in sorted(errors_now.items()):
                errors.add_metric([name, method], n)
            buckets, total = status.finality_seconds
            latency.add_metric([name], list(buckets), total)
        yield from (head, lag, healthy, polls, calls, errors, by_outcome, watched, latency)
        yield from self._endpoints()

    def _endpoints(self) -> Iterator[Metric]:
        """Per-endpoint health of chains read through several endpoints."""
        labels = ["chain", "endpoint"]
        up = GaugeMetricFamily(
            "finality_rpc_endpoint_up", "1 when the endpoint's circuit is closed", labels=labels
        )
        state = GaugeMetricFamily(
            "finality_rpc_endpoint_state",
            "1 for the endpoint's current state (closed, half_open, open, wrong_chain, stalled)",
            labels=[*labels, "state"],
        )
        latency = GaugeMetricFamily(
            "finality_rpc_endpoint_latency_ms", "Moving average answer time", labels=labels
        )
        error_rate = GaugeMetricFamily(
            "finality_rpc_endpoint_error_rate", "Failed calls over calls", labels=labels
        )
        head_lag = GaugeMetricFamily(
            "finality_rpc_endpoint_head_lag_blocks",
            "Blocks behind the best head any endpoint showed",
            labels=labels,
        )
        calls = CounterMetricFamily(
            "finality_rpc_endpoint_calls", "Calls sent to the endpoint", labels=labels
        )
        for name, client in self.deps.clients.items():
            report = pool.health_report(client)
            for i, h in enumerate(report or ()):
                # The index keeps two endpoints on one host (keys in the path) apart.
                key = [name, f"{i}:{redact(str(h['endpoint']))}"]
                up.add_metric(key, 1.0 if h["state"] == "closed" else 0.0)
                for s in ("closed", "half_open", "open", "wrong_chain", "stalled"):
                    state.add_metric([*key, s], 1.0 if h["state"] == s else 0.0)
                if isinstance(h["latency_ms"], float):
                    latency.add_metric(key, h["latency_ms"])
                if isinstance(h["error_rate"], float):
                    error_rate.add_metric(key, h["error_rate"])
                if isinstance(h["head_lag"], int):
                    head_lag.add_metric(key, h["head_lag"])
                if isinstance(h["calls"], int):
                    calls.add_metric(key, h["calls"])
        yield from (up, state, latency, error_rate, head_lag, calls)

    def _store(self) -> Iterator[Metric]:
        svc = self.deps
        verdicts = GaugeMetricFamily(
            "finality_settlements", "Settlements by verdict", labels=["chain", "verdict"]
        )
        for (chain, verdict), n in sorted(svc.store.verdict_counts().items()):
            verdicts.add_metric([chain, verdict], n)
        outbox = svc.store.outbox()
        depths = outbox.reorg_depths()
        reorgs = CounterMetricFamily("finality_reorgs", "Reorgs seen", labels=["chain"])
        by_depth = HistogramMetricFamily(
            "finality_reorg_depth_blocks", "Reorgs seen, by depth (blocks)", labels=["chain"]
        )
        for chain in svc.board.all():
            counts = {d: n for (c, d), n in depths.items() if c == chain}
            reorgs.add_metric([chain], sum(counts.values()))
            buckets, total = _histogram(counts)
            by_depth.add_metric([chain], buckets, total)
        deliveries = GaugeMetricFamily(
            "finality_deliveries", "Outbox rows by channel and state", labels=["channel", "state"]
        )
        for (channel, state), n in sorted(outbox.counts().items()):
            deliveries.add_metric([channel, state], n)
        count, oldest = outbox.backlog()
        backlog = GaugeMetricFamily("finality_outbox_backlog", "Outbox rows pending or being sent")
        backlog.add_metric([], count)
        age = GaugeMetricFamily(
            "finality_outbox_oldest_age_seconds", "Age of the oldest undelivered outbox row"
        )
        age.add_metric([], 0.0 if oldest is None else max(0.0, (svc.clock() - oldest) / 1000))
        yield from (verdicts, reorgs, by_depth, deliveries, backlog, age)

    def _delivery(self) -> Iterator[Metric]:
        attempts = CounterMetricFamily(
            "finality_delivery_attempts",
            "Delivery attempts by channel and outcome (delivered, retry, dead, waiting, "
            "superseded), this process",
            labels=["channel", "outcome"],
        )
        for sender in self.deps.senders:
            for (channel, outcome), n in sorted(dict(sender.outcomes).items()):
                attempts.add_metric([channel, outcome], n)
        yield attempts

    def _receipts(self) -> Iterator[Metric]:
        """Receipts this process stored, and the ``GET …/receipt`` reads asleep waiting for
        one (``?wait=``: each an open connection and a sleeping task, no thread)."""
        receipts = self.deps.receipts
        if receipts is None:
            return
        issued = CounterMetricFamily(
            "finality_receipts_issued", "Receipts signed and stored, this process"
        )
        issued.add_metric([], receipts.signal.count)
        waiting = GaugeMetricFamily(
            "finality_receipt_reads_waiting", "Receipt reads waiting for a receipt to be stored"
        )
        waiting.add_metric([], receipts.signal.waiting)
        yield from (issued, waiting)
