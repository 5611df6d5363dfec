"""An agent registers a payment to an address through the MCP server (``finality mcp`` as a
process over stdio, in front of a real daemon on a real anvil) and waits until it is paid."""

from __future__ import annotations

import pytest

from tests.e2e.test_mcp import connect, error_text, result
from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_an_agent_registers_a_payment_and_waits_until_paid(
    module_anvil: Anvil, module_daemon: Daemon
) -> None:
    to = module_anvil.accounts[6]
    async with connect("stdio", module_daemon, None) as mcp:
        names = {tool.name for tool in (await mcp.list_tools()).tools}
        assert "register_payment" in names
        view = result(
            await mcp.call_tool(
                "register_payment",
                {"chain": CHAIN, "to": to, "asset": "native", "amount": "900"},
            )
        )
        assert view["kind"] == "evm_payment" and view["remaining"] == "900"
        module_daemon.wait_head(module_anvil.head())
        tx = {"from": module_anvil.accounts[1], "to": to, "value": hex(900)}
        module_anvil.receipt(module_anvil.rpc("eth_sendTransaction", tx))
        module_anvil.mine(3)
        done = result(
            await mcp.call_tool("wait_for_finality", {"settlement_id": view["settlement_id"]})
        )
        assert done["verdict"] == "FINALITY_CONFIRMED" and done["paid"] == "900"
        refused = await mcp.call_tool(
            "register_payment", {"chain": CHAIN, "to": to, "asset": "native", "amount": "1.5"}
        )
        assert "amount" in error_text(refused)
