"""A chain's node health: ``rpc_unhealthy`` once after repeated bad polls, then one
``rpc_recovered``; and the per-endpoint events other parts report through the chain.

A poll is bad when it failed or the node lags behind the processed head (a node that went
backwards). After :data:`UNHEALTHY_AFTER_POLLS` bad polls in a row (at once when the node's
data failed a check: a lie is no blip) one ``rpc_unhealthy`` event (critical) is stored, with its alert deliveries; the first good poll afterwards
stores one ``rpc_recovered`` (info). A single blip raises nothing. If the store fails, the
event is retried on the next poll.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from chains.redact import redact_text, redact_url
from guard.event_kinds import EventKind
from watcher.clock import Clock

log = logging.getLogger("finality.engine")

UNHEALTHY_AFTER_POLLS = 3
"""Consecutive failed (or lagging) polls after which ``rpc_unhealthy`` is raised, once."""

StoreEvent = Callable[[str, str, dict[str, Any]], bool]
"""Stores one event (kind, severity, payload) with its alerts; False if the store failed."""


class ChainHealth:
    """The health state of one chain's node, fed after every poll."""

    def __init__(self, chain: str, clock: Clock, store_event: StoreEvent) -> None:
        self.chain = chain
        self.clock = clock
        self.store_event = store_event
        self.bad_polls = 0
        self.bad_since: int | None = None
        self.unhealthy_since: int | None = None

    def note_poll(
        self, reason: str | None, endpoint: str, head_number: int | None, at_once: bool = False
    ) -> None:
        """Count a poll that went wrong for ``reason`` (None: it went well); ``at_once``: a
        failure no retry explains away (the node's data failed a check), reported now."""
        now = self.clock()
        if reason is None:
            self._good(now)
            return
        self.bad_polls += 1
        if self.bad_since is None:
            self.bad_since = now
        enough = at_once or self.bad_polls >= UNHEALTHY_AFTER_POLLS
        if not enough or self.unhealthy_since is not None:
            return
        payload = {
            "chain": self.chain,
            "endpoint": redact_url(endpoint),
            "reason": redact_text(reason, [endpoint]),
            "failed_polls": self.bad_polls,
            "since": self.bad_since,
            "head_number": head_number,
        }
        if self.store_event(EventKind.RPC_UNHEALTHY, "critical", payload):
            self.unhealthy_since = self.bad_since
            log.error("chain %s: node unhealthy: %s", self.chain, reason)

    def _good(self, now: int) -> None:
        """A good poll: reset the count; report the recovery once if it was unhealthy."""
        self.bad_polls = 0
        self.bad_since = None
        if self.unhealthy_since is None:
            return
        payload = {
            "chain": self.chain,
            "reason": f"node answers again after {now - self.unhealthy_since} ms",
            "unhealthy_since": self.unhealthy_since,
        }
        if self.store_event(EventKind.RPC_RECOVERED, "info", payload):
            self.unhealthy_since = None

    def endpoint_problem(self, endpoint: str, reason: str) -> bool:
        """Store one ``rpc_unhealthy`` event about one endpoint (e.g. it answered another
        chain id at start-up) while the chain runs on the others; False if the store failed."""
        payload = {
            "chain": self.chain,
            "endpoint": redact_url(endpoint),
            "reason": redact_text(reason, [endpoint]),
        }
        return self.store_event(EventKind.RPC_UNHEALTHY, "critical", payload)

    def endpoint_event(
        self, kind: str, severity: str, endpoint: str, state: str, reason: str
    ) -> bool:
        """Store one event about one endpoint's health change (``rpc_unhealthy`` or
        ``rpc_recovered``, see :mod:`watcher.engine.endpoint_alerts`); False if the store
        failed."""
        payload = {
            "chain": self.chain,
            "endpoint": redact_url(endpoint),  # events are shown, sent and logged: no keys
            "state": state,
            "reason": redact_text(reason, [endpoint]),
        }
        return self.store_event(kind, severity, payload)
