"""Workflows as an agent meets them over MCP: the SDK's own client over stdio, two sessions
(agent A and agent B, each its own ``finality mcp`` process) against a real daemon and anvil.

A starts a workflow and begins ``charge`` bound to its transaction's settlement; B's
takeover while A's lease is live is answered ``LOCK_NOT_HELD`` (an answer, not an error),
then, once the lease lapsed, ``HANDOFF_SAFE`` with ``charge`` pending; B follows it with
``get_workflow`` to ``completed`` once the tx is final and completes it; A, writing late
with its old token, gets a tool error naming ``fencing_token``.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from tests.e2e.test_mcp import error_text, result
from tests.support.anvil import ROOT, Anvil
from tests.support.daemon import CHAIN, Daemon, subprocess_env

if TYPE_CHECKING:
    from mcp import Client  # imported where an agent connects (a second of CPU)

pytestmark = pytest.mark.anyio

WORKFLOW_TOOLS = {
    "start_workflow",
    "begin_step",
    "complete_step",
    "take_over_workflow",
    "get_workflow",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def agent(daemon: Daemon) -> AsyncIterator[Client]:
    """One agent's MCP session: ``finality mcp`` over stdio, started by the SDK."""
    from mcp import Client, StdioServerParameters

    target = StdioServerParameters(
        command=sys.executable,
        args=["-m", "watcher.cli", "mcp", "--api", daemon.url],
        env=subprocess_env(),
        cwd=str(ROOT),
    )
    async with Client(target) as client:
        yield client


async def poll(call: Any, done: Any, timeout: float = 90.0) -> dict[str, Any]:
    """``call()`` again until ``done(answer)`` (the machine may be slow: a generous limit)."""
    with anyio.fail_after(timeout):
        while True:
            answer = await call()
            if done(answer):
                return dict(answer)
            await anyio.sleep(0.2)


async def test_agent_b_takes_over_from_agent_a_over_mcp(
    module_anvil: Anvil, module_daemon: Daemon
) -> None:
    tx = module_anvil.send()
    module_anvil.receipt(tx)
    async with agent(module_daemon) as a, agent(module_daemon) as b:
        tools = {t.name: t for t in (await a.list_tools()).tools}
        assert set(tools) >= WORKFLOW_TOOLS
        assert "never" in (tools["take_over_workflow"].description or "").lower()
        sid = result(
            await a.call_tool(
                "register_settlement", {"chain": CHAIN, "tx_hash": tx, "confirmations": 3}
            )
        )["settlement_id"]
        wf = result(
            await a.call_tool(
                "start_workflow",
                {"steps": ["charge", "ship"], "holder": "agent-a", "lease_s": 2},
            )
        )
        wid, token = wf["workflow_id"], wf["lock"]["fencing_token"]
        result(
            await a.call_tool(
                "begin_step",
                {
                    "workflow_id": wid,
                    "step": "charge",
                    "fencing_token": token,
                    "operation": "charge card for order 812",
                    "recovery": {"settlement_id": sid},
                },
            )
        )

        async def take_over() -> dict[str, Any]:
            args = {"workflow_id": wid, "holder": "agent-b", "lease_s": 30}
            return result(await b.call_tool("take_over_workflow", args))

        first = await take_over()
        if first["verdict"] == "LOCK_NOT_HELD":  # A's lease still live (as it nearly always is)
            assert first["holder"] == "agent-a" and first["lease_expires_at"] > 0
            first = await poll(take_over, lambda x: x["verdict"] != "LOCK_NOT_HELD")
        assert first["verdict"] == "HANDOFF_SAFE" and first["fencing_token"] == 2
        assert [(r["step"], r["state"]) for r in first["recovery"]] == [("charge", "pending")]

        module_anvil.mine(3)

        async def view() -> dict[str, Any]:
            return result(await b.call_tool("get_workflow", {"workflow_id": wid}))

        final = await poll(view, lambda v: v["recovery"][0]["state"] != "pending")
        charge = final["recovery"][0]
        assert charge["state"] == "completed"
        assert charge["evidence"]["receipt"]["kind"] == "settlement_finality_receipt"
        verified = result(
            await b.call_tool("verify_receipt", {"receipt": charge["evidence"]["receipt"]})
        )
        assert verified["valid"] is True
        args = {"workflow_id": wid, "step": "charge", "fencing_token": 2}
        done = result(await b.call_tool("complete_step", args))
        assert done["steps"][0]["state"] == "completed"

        late = await a.call_tool(
            "begin_step",
            {"workflow_id": wid, "step": "ship", "fencing_token": token, "operation": "ship"},
        )
        assert "fencing_token: stale (current 2)" in error_text(late)
        assert (
            result(await b.call_tool("get_workflow", {"workflow_id": wid}))["steps"][1]["state"]
            == "pending"
        )
