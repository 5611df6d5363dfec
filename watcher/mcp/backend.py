"""The daemon's HTTP API as the MCP tools need it: one small async adapter.

Kept apart from the tools so it can be swapped for :mod:`watcher.client` without touching
them. Every API refusal becomes a :class:`ToolError` carrying the API's own message (it
names the field), so the agent sees what to fix and the server keeps serving.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
from mcp.server.mcpserver.exceptions import ToolError

TIMEOUT_S = 15.0
"""Per request; the daemon answers in milliseconds, a receipt being signed in under 5 s."""


class DaemonApi:
    """Async access to one daemon at ``base`` (``http://127.0.0.1:8710``)."""

    def __init__(self, base: str, timeout: float = TIMEOUT_S) -> None:
        self.base = base.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.base, timeout=timeout)

    async def close(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ToolError(
                f"the finality daemon at {self.base} is unreachable ({type(exc).__name__}); "
                "nothing was registered or changed"
            ) from None

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = await self._call(method, path, **kwargs)
        body = _body(response)
        if response.status_code >= 400:
            raise ToolError(_refusal(response.status_code, body))
        if not isinstance(body, dict):
            raise ToolError(f"the daemon answered {path} with something not a JSON object")
        return body

    async def register(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /v1/settlements``: the settlement view (201 new, 200 already registered)."""
        return await self._json("POST", "/v1/settlements", json=body)

    async def settlement(self, settlement_id: str) -> dict[str, Any]:
        """``GET /v1/settlements/{id}``."""
        return await self._json("GET", f"/v1/settlements/{_seg(settlement_id)}")

    async def transaction(self, chain: str, tx_hash: str) -> dict[str, Any]:
        """``GET /v1/chains/{chain}/txs/{hash}``: registered or answered live."""
        return await self._json("GET", f"/v1/chains/{_seg(chain)}/txs/{_seg(tx_hash)}")

    async def receipt(self, settlement_id: str) -> dict[str, Any] | None:
        """``GET /v1/settlements/{id}/receipt``; None while there is none signed yet."""
        response = await self._call("GET", f"/v1/settlements/{_seg(settlement_id)}/receipt")
        body = _body(response)
        if response.status_code == 404 and isinstance(body, dict) and "verdict" in body:
            return None
        if response.status_code >= 400 or not isinstance(body, dict):
            raise ToolError(_refusal(response.status_code, body))
        return body


def _seg(value: str) -> str:
    """One URL path segment: a value cannot reach another route."""
    return quote(value, safe="")


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _refusal(status: int, body: Any) -> str:
    """The API's one-line error (``"tx_hash: …"``), with its fields named."""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        fields = body.get("fields")
        named = f" (fields: {', '.join(map(str, fields))})" if fields else ""
        return f"{body['error']}{named}"
    return f"the daemon refused the request (HTTP {status})"
