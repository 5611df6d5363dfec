"""Alerts about single endpoints of a chain read through several.

With several endpoints a bad one does not stop the chain: failover reads on from the others,
and the chain's own ``rpc_unhealthy`` (no usable endpoint at all) never fires. An operator
still needs to hear that a node went bad — its circuit opened, its head froze while others
moved on, it started answering for another chain — before the next one does too.

After every successful poll of such a chain, :class:`EndpointAlerts` compares each
endpoint's health state with what it last reported and stores, once per change:

- ``rpc_unhealthy`` (warning: the chain still runs) when an endpoint goes ``open``,
  ``stalled``, ``forked`` (its chain cannot be joined to ours), ``inconsistent`` (its data
  failed a check: not believed) or ``wrong_chain``, with its
  state and the reason (its last error);
- ``rpc_recovered`` (info) when it is ``closed`` again.

``half_open`` (one probe let through) is a step on the way back, not a change to report. An
endpoint found serving another chain id at start-up was already reported by the start-up
check (with the answers of all endpoints), so it is not reported a second time here.
Events go through the store like every alert: webhooks, Slack, logs and ``/v1/events``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from chains import pool
from chains.health import redact, why_unused
from chains.redact import redact_text

if TYPE_CHECKING:
    from chains.beacon import BeaconClient
    from chains.rpc import RpcClient
    from watcher.engine.chain_watcher import ChainWatcher

BAD_STATES = frozenset({"open", "stalled", "forked", "wrong_chain", "inconsistent"})
"""States in which an endpoint is not used."""


class EndpointAlerts:
    """The daemon component (see the module doc)."""

    def __init__(
        self,
        clients: Mapping[str, RpcClient],
        watchers: Mapping[str, ChainWatcher],
        beacons: Mapping[str, BeaconClient] | None = None,
    ) -> None:
        """Reads each chain's endpoint health from ``clients`` (and its Beacon API's from
        ``beacons``) and stores the alerts through the chain's engine in ``watchers`` (its
        fence and plan)."""
        self.clients = clients
        self.watchers = watchers
        self.beacons = dict(beacons or {})
        self._reported: dict[tuple[str, int], str] = {}
        """Per (chain, endpoint index): the state last reported, ``closed`` or a bad one."""
        self._seen: set[str] = set()

    def start(self) -> None:
        """Nothing runs in the background: the work is done after each poll."""

    def stop(self) -> None:
        """Nothing to stop."""

    def after_poll(self, chain: str) -> None:
        """In the chain's poll thread: report the endpoints whose state changed."""
        report = pool.health_report(self.clients[chain]) or []
        beacon = self.beacons.get(chain)
        if beacon is not None:  # a Beacon API endpoint fails and recovers as an RPC one
            report = [*report, *beacon.health_report()]
        if not report:
            return
        first = chain not in self._seen
        self._seen.add(chain)
        watcher = self.watchers[chain]
        for i, endpoint in enumerate(report):
            state = str(endpoint["state"])
            key = (chain, i)
            last = self._reported.get(key, "closed")
            if first and state == "wrong_chain":
                self._reported[key] = state  # reported by the start-up check
                continue
            url = redact(str(endpoint["endpoint"]))
            if state in BAD_STATES and state != last:
                said = redact_text(why_unused(endpoint), [str(endpoint["endpoint"])])
                if watcher.endpoint_event("rpc_unhealthy", "warning", url, state, said):
                    self._reported[key] = state
            elif (
                state == "closed"
                and last != "closed"
                and watcher.endpoint_event("rpc_recovered", "info", url, state, "usable again")
            ):
                self._reported[key] = state
