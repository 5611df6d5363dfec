"""The MCP server: seven settlement tools (and the workflow tools of
:mod:`watcher.mcp.mcp_workflows`) over a running daemon, results as structured JSON objects.

Bad arguments are tool errors naming the field (the SDK's schema check, or the daemon's
own ``{"error"}`` message passed on); the server keeps serving. ``verify_receipt`` is
offline: an invalid receipt is an answer ``{"valid": false, "reason"}``, not an error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from watcher.client.common import invoice_body, payment_registration, registration
from watcher.mcp import descriptions as text
from watcher.mcp.decide import decision, is_terminal, progress_line
from watcher.mcp.mcp_backend import DaemonApi
from watcher.mcp.mcp_workflows import add_workflow_tools

MAX_WAIT_S = 3600.0
PROGRESS_S = 1.0
"""How often a waiting ``wait_for_finality`` reads the view for its progress notifications."""

SettlementId = Annotated[str, Field(description="the settlement_id register_settlement returned")]
Json = dict[str, Any]


class Tools:
    """The tools, bound to one daemon API."""

    def __init__(self, api: DaemonApi) -> None:
        self.api = api

    async def register_settlement(
        self,
        chain: Annotated[str | None, Field(description="chain name, e.g. 'local'")] = None,
        tx_hash: Annotated[str | None, Field(description="0x + 64 hex digits")] = None,
        confirmations: Annotated[int | None, Field(ge=1, description="required depth")] = None,
        timeout_s: Annotated[float | None, Field(gt=0, description="fail if not final by")] = None,
        dependent_state: Annotated[Any, Field(description="JSON the daemon holds")] = None,
        commit_url: Annotated[str | None, Field(description="where to deliver it")] = None,
        kind: Annotated[str | None, Field(description="evm_tx (default) or a source")] = None,
        ref: Annotated[str | None, Field(description="payment/job id (source kinds)")] = None,
        source: Annotated[str | None, Field(description="configured source name")] = None,
    ) -> Json:
        body = registration(
            chain,
            tx_hash,
            confirmations=confirmations,
            timeout_s=timeout_s,
            dependent_state=dependent_state,
            commit_url=commit_url,
            kind=kind,
            ref=ref,
            source=source,
        )
        return await self.api.register(body)

    async def register_payment(
        self,
        chain: Annotated[str, Field(description="chain name, e.g. 'local'")],
        to: Annotated[str, Field(description="receiving address, 0x")],
        asset: Annotated[str, Field(description="'native' or the token contract")],
        amount: Annotated[str, Field(description="base units, a decimal string")],
        sender: Annotated[str | None, Field(description="count only transfers from")] = None,
        reference: Annotated[str | None, Field(description="idempotency key")] = None,
        timeout_s: Annotated[float | None, Field(gt=0, description="fail if not paid by")] = None,
        dependent_state: Annotated[Any, Field(description="JSON the daemon holds")] = None,
        commit_url: Annotated[str | None, Field(description="where to deliver it")] = None,
    ) -> Json:
        opts = {
            "timeout_s": timeout_s,
            "dependent_state": dependent_state,
            "commit_url": commit_url,
        }
        body = payment_registration(
            chain, to, asset, amount, sender=sender, reference=reference, **opts
        )
        return await self.api.register_payment(body)

    async def create_invoice(
        self,
        chain: Annotated[str, Field(description="chain name, e.g. 'local'")],
        asset: Annotated[str, Field(description="'native' or the token contract")],
        amount: Annotated[str, Field(description="base units, a decimal string")],
        expires_in_s: Annotated[float, Field(gt=0, description="seconds until it expires")],
        reference: Annotated[str | None, Field(description="your order id")] = None,
        dependent_state: Annotated[Any, Field(description="JSON the daemon holds")] = None,
        commit_url: Annotated[str | None, Field(description="where to deliver it")] = None,
    ) -> Json:
        opts = {
            "reference": reference,
            "dependent_state": dependent_state,
            "commit_url": commit_url,
        }
        return await self.api.create_invoice(
            invoice_body(chain, asset, amount, expires_in_s, **opts)
        )

    async def get_invoice(
        self, invoice_id: Annotated[str, Field(description="inv_… from create_invoice")]
    ) -> Json:
        return await self.api.invoice(invoice_id)

    async def get_settlement(self, settlement_id: SettlementId) -> Json:
        return await self.api.settlement(settlement_id)

    async def check_transaction(
        self,
        chain: Annotated[str, Field(description="chain name, e.g. 'local'")],
        tx_hash: Annotated[str, Field(description="0x + 64 hex digits")],
    ) -> Json:
        return await self.api.transaction(chain, tx_hash)

    async def wait_for_finality(
        self,
        settlement_id: SettlementId,
        ctx: Context,
        timeout_s: Annotated[float, Field(gt=0, le=MAX_WAIT_S)] = 60.0,
    ) -> Json:
        sent: list[str] = []
        shown = [0.0]

        async def report(view: Json) -> None:
            line = progress_line(view)
            if not sent or sent[-1] != line:
                sent.append(line)
                total = _total(view)
                shown[0] = progress_value(view, total, shown[0])
                await ctx.report_progress(shown[0], total, line)

        view = await self.api.settlement(settlement_id)
        await report(view)
        if is_terminal(view):
            return view
        ticks = asyncio.ensure_future(self._tick(settlement_id, report))
        try:
            view = await self.api.wait(settlement_id, timeout_s, report)
        finally:
            ticks.cancel()
            with contextlib.suppress(asyncio.CancelledError, ToolError):
                await ticks
        await report(view)
        return view

    async def _tick(self, settlement_id: str, report: Callable[[Json], Awaitable[None]]) -> None:
        """Depth grows with every head and no event says so: look every PROGRESS_S while the
        wait (on the event stream) runs, for the progress notifications only."""
        while True:
            await asyncio.sleep(PROGRESS_S)
            await report(await self.api.settlement(settlement_id))

    async def may_commit(self, settlement_id: SettlementId) -> Json:
        view = await self.api.settlement(settlement_id)
        receipt = await self.api.receipt(settlement_id) if is_terminal(view) else None
        return decision(view, receipt)

    async def verify_receipt(
        self,
        receipt: Annotated[
            Any, Field(description="the receipt document, as served (or its JSON text)")
        ],
        signer: Annotated[str | None, Field(description="accept only this 0x address")] = None,
    ) -> Json:
        return verify_offline(receipt, signer)


def _total(view: Json) -> float | None:
    required = view.get("required_confirmations")
    return float(required) if isinstance(required, int) else None


def progress_value(view: Json, total: float | None, before: float) -> float:
    """The progress to notify: the depth, never past ``total`` (depth goes on growing past
    the required one) and never below what was sent ``before`` (the protocol asks progress
    to increase; a reorg's lost depth is in the message, not in the number)."""
    depth = float(view.get("confirmations") or 0)
    return max(before, depth if total is None else min(depth, total))


def verify_offline(receipt: object, signer: str | None) -> Json:
    """The client's offline check (:func:`watcher.client.verify`): any document is an answer,
    ``{"valid": false, "reason"}`` when it is no valid receipt; a malformed ``signer`` is a
    bad argument (a tool error naming it)."""
    from guard.errors import InvalidAddress
    from guard.hexes import parse_checked_address
    from watcher.client.offline import verify

    try:
        trusted = None if signer is None else [str(parse_checked_address(signer, "signer"))]
    except InvalidAddress as exc:
        raise ToolError(str(exc)) from None
    if not isinstance(receipt, dict | str):
        return {
            "valid": False,
            "reason": f"receipt: must be a JSON object, got {type(receipt).__name__}",
        }
    answer = verify(receipt, signers=trusted)
    verified = answer.receipt
    if not answer.valid or verified is None:
        return {"valid": False, "reason": answer.reason}
    return {"valid": True, **verified.identity()}


def build_server(
    api_url: str,
    token: str | None = None,
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING",
) -> MCPServer:
    """The MCP server over the daemon at ``api_url`` (as the caller ``token`` names),
    every tool registered; the SDK logs at ``log_level`` (warnings only by default)."""
    server: MCPServer = MCPServer(
        name="finality-watcher", instructions=text.INSTRUCTIONS, log_level=log_level
    )
    api = DaemonApi(api_url, token=token)
    tools = Tools(api)
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    for fn, description, hints in (
        (
            tools.register_settlement,
            text.REGISTER,
            ToolAnnotations(destructive_hint=False, idempotent_hint=True),
        ),
        (tools.register_payment, text.REGISTER_PAYMENT, ToolAnnotations(destructive_hint=False)),
        (tools.create_invoice, text.CREATE_INVOICE, ToolAnnotations(destructive_hint=False)),
        (tools.get_invoice, text.GET_INVOICE, reads),
        (tools.get_settlement, text.GET, reads),
        (tools.check_transaction, text.CHECK, reads),
        (tools.wait_for_finality, text.WAIT, reads),
        (tools.may_commit, text.MAY_COMMIT, reads),
        (tools.verify_receipt, text.VERIFY, reads),
    ):
        server.add_tool(fn, description=description, annotations=hints, structured_output=True)
    add_workflow_tools(server, api)  # multi-step work handed between agents
    return server
