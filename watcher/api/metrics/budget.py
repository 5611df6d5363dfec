"""Metrics of the per-chain RPC call budget (``calls_per_minute``).

Read from each chain's :class:`chains.budget.CallBudget` at scrape time: the limit, the calls
in the current window, every call sent since start (a counter: batch elements counted one
by one, on every endpoint), and the polls skipped because the budget could not pay for them.
Chains without a budget export nothing here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from chains.budget import CallBudget


def budget_metrics(budgets: Mapping[str, CallBudget]) -> Iterator[Metric]:
    """Per-chain budget, spend in the window, spend since start, skipped polls."""
    limit = GaugeMetricFamily(
        "finality_rpc_budget_calls_per_minute",
        "The chain's budget of JSON-RPC calls per minute (calls_per_minute)",
        labels=["chain"],
    )
    spent = GaugeMetricFamily(
        "finality_rpc_budget_spent",
        "JSON-RPC calls sent in the current budget window (the last minute)",
        labels=["chain"],
    )
    # A counter family named ``..._spent`` would clash with the gauge above in the text
    # format (two TYPE lines for one name): the running total is exported untyped instead,
    # under the name a counter would have. It only ever grows (from 0 at process start).
    total = Metric(
        "finality_rpc_budget_spent_total",
        "JSON-RPC calls counted against the budget since start (every endpoint; a counter)",
        "unknown",
    )
    skipped = CounterMetricFamily(
        "finality_rpc_budget_skipped_polls",
        "Polls skipped because the budget could not pay for them (settlements waited)",
        labels=["chain"],
    )
    for name, budget in sorted(budgets.items()):
        limit.add_metric([name], budget.limit)
        spent.add_metric([name], budget.spent)
        total.add_sample("finality_rpc_budget_spent_total", {"chain": name}, budget.spent_total)
        skipped.add_metric([name], budget.skipped_polls)
    yield limit
    yield spent
    yield total
    yield skipped
