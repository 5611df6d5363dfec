"""Prometheus metrics, read from the service at scrape time (nothing to keep in sync)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from watcher.service import Service


class ServiceCollector(Collector):
    """Head, lag, polls, RPC calls and errors, settlements by verdict, reorgs."""

    def __init__(self, service: Service) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        svc = self.service
        head = GaugeMetricFamily("finality_head_block", "Last processed head", labels=["chain"])
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
        watched = GaugeMetricFamily(
            "finality_watched_settlements", "Settlements followed", labels=["chain"]
        )
        for name, watcher in svc.watchers.items():
            if watcher.head is not None:
                head.add_metric([name], watcher.head.number)
            healthy.add_metric([name], 1.0 if svc.healthy(name) else 0.0)
            polls.add_metric([name], watcher.polls)
            watched.add_metric([name], len(watcher.index.by_id))
            client = svc.clients[name]
            for method, n in sorted(client.calls.items()):
                calls.add_metric([name, method], n)
            for method, n in sorted(client.errors.items()):
                errors.add_metric([name, method], n)
        verdicts = GaugeMetricFamily(
            "finality_settlements", "Settlements by verdict", labels=["chain", "verdict"]
        )
        for (chain, verdict), n in sorted(svc.store.verdict_counts().items()):
            verdicts.add_metric([chain, verdict], n)
        reorgs = CounterMetricFamily("finality_reorgs", "Reorgs seen", labels=["chain"])
        for chain in svc.watchers:
            reorgs.add_metric([chain], len(svc.store.reorgs(chain, limit=1_000_000)))
        yield from (head, healthy, polls, calls, errors, watched, verdicts, reorgs)
