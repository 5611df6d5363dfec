"""A Beacon API client: the light-client data that proves a chain's finality by consensus.

Three endpoints of the standard Beacon API (``/eth/v1/beacon/light_client/…``) are all a
light client needs: the bootstrap at a trusted block root, the updates handing each sync
committee over to the next (one call for a range of periods), and the latest finality
update. Answers are taken as JSON, as served; nothing here trusts them: guard.consensus
verifies every signature and branch before the daemon uses one.

Endpoints are tried in order of preference; a failure (refused, timed out, an HTTP error, an
answer that is not JSON) moves to the next, and when all fail the call raises
:class:`~chains.errors.RpcUnavailable` naming the last one (redacted, as RPC endpoints are),
so the caller handles a beacon node as it handles an RPC node. Each endpoint has the same
health and circuit breaker as an RPC endpoint (chains/health.py): one that keeps failing is
skipped for a backoff, and its state changes raise the same ``rpc_unhealthy`` /
``rpc_recovered`` alerts (watcher/engine/endpoint_alerts.py).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx

from chains.errors import RpcMalformedResponse, RpcUnavailable
from chains.health import EndpointHealth

LIGHT_CLIENT = "/eth/v1/beacon/light_client"


class BeaconClient:
    """Reads light-client data from one or more Beacon API endpoints."""

    def __init__(
        self,
        endpoints: Sequence[str],
        timeout_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not endpoints:
            raise ValueError("a beacon client needs at least one endpoint")
        self.endpoints = [e.rstrip("/") for e in endpoints]
        self._http = httpx.Client(timeout=timeout_s, transport=transport)
        self.calls = 0
        """Requests sent (every endpoint), for metrics and tests."""
        # Two failures in a row open a circuit (an RPC endpoint's three): a light client asks
        # at most once a poll, so two are already a pattern, not a blip.
        self.health = [EndpointHealth(e, failure_threshold=2) for e in self.endpoints]
        """Each endpoint's health and circuit breaker, in ``endpoints`` order."""

    def health_report(self) -> list[dict[str, object]]:
        """Each endpoint's health, as an RPC pool reports its own."""
        return [h.snapshot(None) for h in self.health]

    def close(self) -> None:
        self._http.close()

    def bootstrap(self, block_root: str) -> Any:
        """``/bootstrap/{root}``: the trusted header and its period's committee."""
        return self._get(f"{LIGHT_CLIENT}/bootstrap/{block_root}", {})

    def updates(self, start_period: int, count: int) -> list[Any]:
        """``/updates``: one update per period from ``start_period``, each handing over the
        next period's committee."""
        answer = self._get(
            f"{LIGHT_CLIENT}/updates", {"start_period": start_period, "count": count}
        )
        if not isinstance(answer, list):
            raise RpcMalformedResponse(self.endpoints[0], "light_client/updates", "not a list")
        return answer

    def finality_update(self) -> Any:
        """``/finality_update``: the latest finalized header, signed by the committee."""
        return self._get(f"{LIGHT_CLIENT}/finality_update", {})

    def _get(self, path: str, params: dict[str, int]) -> Any:
        """The first good answer: usable endpoints in order, then (all open) every one."""
        usable = [h for h in self.health if h.usable]
        last: Exception | None = None
        for health in usable or self.health:
            self.calls += 1
            start = time.monotonic()
            try:
                response = self._http.get(
                    health.endpoint + path, params=params, headers={"Accept": "application/json"}
                )
                response.raise_for_status()
                answer = response.json()
            except (httpx.HTTPError, ValueError) as exc:
                last = RpcUnavailable(health.endpoint, path.rsplit("/", 1)[-1], str(exc))
                health.failure(str(last))
                continue
            health.success(time.monotonic() - start)
            return answer
        assert last is not None
        raise last
