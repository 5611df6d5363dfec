"""Metrics of WebSocket head subscriptions (``heads = "ws"``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import Metric

if TYPE_CHECKING:
    from watcher.service import Service


def heads_metrics(service: Service) -> Iterator[Metric]:
    """Per-chain state of the head subscription (none yet)."""
    del service
    yield from ()
