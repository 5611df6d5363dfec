"""Metrics of the per-chain RPC call budget (``calls_per_minute``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import Metric

if TYPE_CHECKING:
    from watcher.service import Service


def budget_metrics(service: Service) -> Iterator[Metric]:
    """Per-chain budget and spend (none yet)."""
    del service
    yield from ()
