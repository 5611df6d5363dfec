"""The ``log`` alert channel: one JSON line per matching event on the ``finality.alerts``
logger. It writes no outbox rows (nothing to retry: the log is local); the sender's
dispatcher calls :meth:`EventLog.tick`, which tails the events table.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from watcher.config.sections import AlertChannelConfig
from watcher.delivery.channel import AlertChannel
from watcher.delivery.events_tail import EventTail
from watcher.delivery.format import SEVERITY_RANK, event_json
from watcher.store.records import EventRecord
from watcher.store.store import Store

alerts_log = logging.getLogger("finality.alerts")

_LEVELS = {"info": logging.INFO, "warning": logging.WARNING, "critical": logging.CRITICAL}

LOG = AlertChannel("log", None)


class EventLog:
    """The ``log`` alert channels: one JSON line per matching event, tailed from the store.

    It starts at the newest event, so a restart does not repeat history; events stored while
    the daemon was down are in ``/v1/events`` (and the webhooks), not in this log.
    """

    def __init__(self, store: Store, channels: Sequence[AlertChannelConfig]) -> None:
        self.store = store
        self.channels = list(channels)
        self.tail: EventTail[EventRecord] | None = None

    def tick(self) -> int:
        """Log the events stored since the last call; returns how many were logged."""
        if not self.channels:
            return 0
        if self.tail is None:
            self.tail = EventTail(self.store.outbox().last_event_id())
            return 0
        logged = 0
        for event in self.tail.take(self.store.events(after_id=self.tail.last, limit=500)):
            for channel in self.channels:
                wanted = "*" in channel.events or event.kind in channel.events
                rank_ok = (
                    SEVERITY_RANK.get(event.severity, 0) >= SEVERITY_RANK[channel.min_severity]
                )
                if wanted and rank_ok:
                    line = {"alert": event.kind, **event_json(event)}
                    alerts_log.log(
                        _LEVELS.get(event.severity, logging.INFO),
                        json.dumps(line, sort_keys=True, separators=(",", ":")),
                    )
                    logged += 1
                    break
        return logged
