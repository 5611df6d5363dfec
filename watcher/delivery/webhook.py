"""The ``webhook`` alert channel: the event as flat JSON, signed like every delivery."""

from __future__ import annotations

from typing import Any

from watcher.delivery.channel import AlertChannel
from watcher.delivery.format import BODY_VERSION


def alert_body(event: dict[str, Any]) -> dict[str, Any]:
    """Body of a generic JSON webhook alert: the event, flat, with a type and version."""
    return {"type": "alert", "version": BODY_VERSION, **event}


WEBHOOK = AlertChannel("webhook", alert_body)
