"""The daemon's HTTP API as the MCP tools need it: :mod:`watcher.client` behind tool errors.

Every client failure becomes a :class:`ToolError` carrying the daemon's own message (it
names the field) and the fields it named, so the agent sees what to fix and the server
keeps serving. A daemon that does not answer is named by scheme, host and port only: a
password or key in ``--api`` never reaches the agent. A receipt not signed yet is ``None`` here (may_commit answers WAIT), not an
error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import quote

from mcp.server.mcpserver.exceptions import ToolError

from chains.health import redact
from watcher.client.async_client import AsyncFinalityClient
from watcher.client.errors import ClientError, Unreachable
from watcher.client.workflows import Call

TIMEOUT_S = 15.0
"""Per request; the daemon answers in milliseconds, a receipt being signed in under 5 s."""

View = dict[str, Any]
_T = TypeVar("_T")


class DaemonApi:
    """Async access to one daemon at ``base`` (``http://127.0.0.1:8710``)."""

    def __init__(self, base: str, timeout: float = TIMEOUT_S, token: str | None = None) -> None:
        self.base = base.rstrip("/")
        # The token goes in a header only: tool answers and errors never carry it.
        self.client = AsyncFinalityClient(self.base, timeout=timeout, token=token)

    async def close(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()

    async def _call(self, call: Coroutine[Any, Any, _T]) -> _T:
        try:
            return await call
        except ClientError as exc:
            raise self._tool_error(exc) from None

    def _tool_error(self, exc: ClientError) -> ToolError:
        if isinstance(exc, Unreachable):
            status = f" (HTTP {exc.status})" if exc.status else ""
            return ToolError(
                f"the finality daemon at {redact(self.base)} did not answer{status}; "
                "nothing was registered or changed"
            )
        return ToolError(refusal(exc))

    async def register(self, body: dict[str, Any]) -> View:
        """``POST /v1/settlements``: the settlement view (new, or the one already registered)."""
        return await self._call(self.client.register(**body))

    async def register_payment(self, body: dict[str, Any]) -> View:
        """``POST /v1/settlements`` of a payment to an address (``kind`` evm_payment)."""
        return await self._call(self.client.request("POST", "/v1/settlements", json=body))

    async def create_invoice(self, body: dict[str, Any]) -> View:
        """``POST /v1/invoices``: a new invoice at a fresh address."""
        return await self._call(self.client.request("POST", "/v1/invoices", json=body))

    async def invoice(self, invoice_id: str) -> View:
        """``GET /v1/invoices/{id}``."""
        return await self._call(self.client.invoice(_seg(invoice_id)))

    async def settlement(self, settlement_id: str) -> View:
        """``GET /v1/settlements/{id}``."""
        return await self._call(self.client.get(_seg(settlement_id)))

    async def transaction(self, chain: str, tx_hash: str) -> View:
        """``GET /v1/chains/{chain}/txs/{hash}``: registered or answered live."""
        return await self._call(self.client.check(_seg(chain), _seg(tx_hash)))

    async def wait(
        self,
        settlement_id: str,
        timeout_s: float,
        on_view: Callable[[View], Awaitable[None]],
    ) -> View:
        """The view once terminal, or the current one at ``timeout_s`` (the client waits on
        the daemon's event stream and reads the view again on each event that concerns it)."""
        call = self.client.wait(_seg(settlement_id), timeout_s=timeout_s, on_progress=on_view)
        return await self._call(call)

    async def workflow(self, call: Call) -> View:
        """One ``/v1/workflows`` request (:mod:`watcher.client.workflows` builds it)."""
        method, path, kw = call
        return dict(await self._call(self.client.request(method, path, **kw)))

    async def take_over(self, call: Call) -> View:
        """``POST /v1/workflows/{id}/takeover``: a lease still live is an answer (the 409's
        body: ``LOCK_NOT_HELD``, the holder, when its lease ends), not an error."""
        method, path, kw = call
        try:
            return dict(await self.client.request(method, path, **kw))
        except ClientError as exc:
            if exc.status == 409 and exc.body.get("verdict") == "LOCK_NOT_HELD":
                return exc.body
            raise self._tool_error(exc) from None

    async def receipt(self, settlement_id: str) -> dict[str, Any] | None:
        """``GET /v1/settlements/{id}/receipt``; None while none is signed yet (404)."""
        try:
            return await self.client.receipt(_seg(settlement_id))
        except ClientError as exc:
            if exc.status == 404 and not isinstance(exc, Unreachable):
                return None
            raise self._tool_error(exc) from None


def _seg(value: str) -> str:
    """One URL path segment: a value cannot reach another route."""
    return quote(value, safe="")


def refusal(exc: ClientError) -> str:
    """The daemon's one-line error (``"tx_hash: …"``), with the fields it named."""
    named = f" (fields: {', '.join(map(str, exc.fields))})" if exc.fields else ""
    return f"{exc}{named}"
