"""A Beacon API client: the light-client data that proves a chain's finality by consensus.

Three endpoints of the standard Beacon API (``/eth/v1/beacon/light_client/…``) are all a
light client needs: the bootstrap at a trusted block root, the updates handing each sync
committee over to the next (one call for a range of periods), and the latest finality
update. Answers are taken as JSON, as served; nothing here trusts them: guard.consensus
verifies every signature and branch before the daemon uses one.

Endpoints are tried in order of preference; a failure (refused, timed out, an HTTP error, an
answer that is not JSON) moves to the next, and when all fail the call raises
:class:`~chains.errors.RpcUnavailable` naming the last one (redacted, as RPC endpoints are),
so the caller handles a beacon node as it handles an RPC node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from chains.errors import RpcMalformedResponse, RpcUnavailable

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
        last: Exception | None = None
        for endpoint in self.endpoints:
            self.calls += 1
            try:
                response = self._http.get(
                    endpoint + path, params=params, headers={"Accept": "application/json"}
                )
                response.raise_for_status()
                return response.json()
            except (httpx.HTTPError, ValueError) as exc:
                last = RpcUnavailable(endpoint, path.rsplit("/", 1)[-1], str(exc))
        assert last is not None
        raise last
