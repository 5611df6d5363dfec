"""``finality mcp`` as an agent meets it: the official MCP SDK's client, over stdio and over
streamable HTTP, against a real daemon process and a real anvil.

The path an agent takes: register a transfer, ask ``may_commit`` (WAIT: not final, with why and
until when), mine, ``wait_for_finality`` (progress notifications), ``may_commit`` again
(COMMIT with the signed finality receipt), verify that receipt offline, and see a tampered copy
rejected as an answer. A reverted transaction ends in DISCARD with its failure receipt. Bad
arguments are tool errors naming the field, and the server keeps answering afterwards.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.support.anvil import ROOT, Anvil, free_port
from tests.support.daemon import CHAIN, Daemon, subprocess_env, wait_for

if TYPE_CHECKING:
    # The SDK costs a second of CPU to import: imported where a test connects, not by every
    # pytest-xdist worker that collects this file.
    from mcp import Client
    from mcp.types import CallToolResult

pytestmark = pytest.mark.anyio

MCP_START_S = 30.0
"""Deadline for the HTTP server's first answer (a 2-core machine under load)."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def http_mcp(module_daemon: Daemon) -> Iterator[str]:
    """``finality mcp --http 127.0.0.1:PORT`` as a process; yields its /mcp URL."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "watcher.cli",
            "mcp",
            "--api",
            module_daemon.url,
            "--http",
            f"127.0.0.1:{port}",
        ],
        cwd=ROOT,
        env=subprocess_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def listening() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"finality mcp --http exited with {proc.returncode}")
        try:
            httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=1.0)
        except httpx.HTTPError:
            return False
        return True

    try:
        wait_for(listening, timeout=MCP_START_S, what="finality mcp --http")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@asynccontextmanager
async def connect(transport: str, daemon: Daemon, http_url: str | None) -> AsyncIterator[Client]:
    """The SDK's client over ``transport`` ("stdio" starts ``finality mcp`` itself)."""
    from mcp import Client, StdioServerParameters

    target: StdioServerParameters | str
    if transport == "stdio":
        target = StdioServerParameters(
            command=sys.executable,
            args=["-m", "watcher.cli", "mcp", "--api", daemon.url],
            env=subprocess_env(),
            cwd=str(ROOT),
        )
    else:
        assert http_url is not None
        target = http_url
    async with Client(target) as client:
        yield client


def result(answer: CallToolResult) -> dict[str, Any]:
    """The structured result of a successful call."""
    assert not answer.is_error, answer.content
    assert isinstance(answer.structured_content, dict), answer
    return answer.structured_content


def error_text(answer: CallToolResult) -> str:
    """The message of a tool error."""
    assert answer.is_error, answer.structured_content
    return " ".join(getattr(block, "text", "") for block in answer.content)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_agent_waits_for_commit_and_verifies_its_receipt(
    transport: str, module_anvil: Anvil, module_daemon: Daemon, request: pytest.FixtureRequest
) -> None:
    http_url = request.getfixturevalue("http_mcp") if transport == "http" else None
    tx = module_anvil.send()
    module_anvil.receipt(tx)
    async with connect(transport, module_daemon, http_url) as mcp:
        names = {tool.name for tool in (await mcp.list_tools()).tools}
        assert names >= {
            "register_settlement",
            "get_settlement",
            "check_transaction",
            "wait_for_finality",
            "may_commit",
            "verify_receipt",
        }
        view = result(
            await mcp.call_tool(
                "register_settlement", {"chain": CHAIN, "tx_hash": tx, "confirmations": 3}
            )
        )
        assert view["tx_hash"] == tx and view["required_confirmations"] == 3
        sid = view["settlement_id"]

        wait = result(await mcp.call_tool("may_commit", {"settlement_id": sid}))
        assert wait["decision"] == "WAIT" and wait["receipt"] is None
        assert wait["verdict"] == "AWAITING_FINALITY" and wait["why"]
        assert wait["until"] > time.time() * 1000  # the deadline, unix milliseconds

        early = result(
            await mcp.call_tool("wait_for_finality", {"settlement_id": sid, "timeout_s": 0.3})
        )
        assert early["settlement_id"] == sid and early["verdict"] == "AWAITING_FINALITY"

        module_anvil.mine(5)  # past the required depth: progress stops at its total
        seen: list[str | None] = []
        numbers: list[tuple[float, float | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(message)
            numbers.append((progress, total))

        final = result(
            await mcp.call_tool(
                "wait_for_finality",
                {"settlement_id": sid, "timeout_s": 60},
                progress_callback=on_progress,
            )
        )
        assert final["verdict"] == "FINALITY_CONFIRMED" and final["confirmations"] >= 3
        assert seen and all("depth" in (m or "") for m in seen)
        assert all(total is None or value <= total for value, total in numbers), numbers
        assert [v for v, _ in numbers] == sorted(v for v, _ in numbers), numbers
        assert (
            result(await mcp.call_tool("get_settlement", {"settlement_id": sid}))["verdict"]
            == "FINALITY_CONFIRMED"
        )

        commit = result(await mcp.call_tool("may_commit", {"settlement_id": sid}))
        assert commit["decision"] == "COMMIT" and commit["verdict"] == "FINALITY_CONFIRMED"
        receipt = commit["receipt"]
        assert receipt["kind"] == "settlement_finality_receipt"

        valid = result(await mcp.call_tool("verify_receipt", {"receipt": receipt}))
        assert valid == {**valid, "valid": True, "settlement_id": sid, "tx_hash": tx}
        tampered = copy.deepcopy(receipt)
        tampered["tx_hash"] = "0x" + "ab" * 32
        rejected = result(await mcp.call_tool("verify_receipt", {"receipt": tampered}))
        assert rejected["valid"] is False and rejected["reason"]
        stranger = result(
            await mcp.call_tool("verify_receipt", {"receipt": receipt, "signer": "0x" + "11" * 20})
        )
        assert stranger["valid"] is False and "signer" in stranger["reason"]


async def test_a_reverted_transaction_ends_in_discard_with_its_receipt(
    module_anvil: Anvil, module_daemon: Daemon
) -> None:
    tx = module_anvil.send_revert()
    assert module_anvil.receipt(tx)["status"] == "0x0"
    async with connect("stdio", module_daemon, None) as mcp:
        state = {"order": "o-17", "credit": 5}
        view = result(
            await mcp.call_tool(
                "register_settlement", {"chain": CHAIN, "tx_hash": tx, "dependent_state": state}
            )
        )
        sid = view["settlement_id"]
        assert view["dependent_state"] == state
        binding = view["binding"]
        assert binding["kind"] == "dependent_state_binding_receipt"
        assert result(await mcp.call_tool("verify_receipt", {"receipt": binding}))["valid"]
        module_anvil.mine(3)
        final = result(
            await mcp.call_tool("wait_for_finality", {"settlement_id": sid, "timeout_s": 60})
        )
        assert final["verdict"] == "SETTLEMENT_FAILED"
        discard = result(await mcp.call_tool("may_commit", {"settlement_id": sid}))
        assert discard["decision"] == "DISCARD" and discard["verdict"] == "SETTLEMENT_FAILED"
        assert discard["receipt"]["kind"] == "settlement_failure_receipt"
        assert (
            result(await mcp.call_tool("verify_receipt", {"receipt": discard["receipt"]}))["valid"]
            is True
        )


def malformed_receipts() -> list[tuple[Any, str]]:
    """Receipts an agent may be handed that once made the tool fail: a payment's evidence
    with a null head and a number for its transfers (mainnet block 18,000,000), a lone
    surrogate (escaped in a text: the SDK's client cannot send one in an object) and a list;
    each with words its reason holds. (Duplicate keys cannot reach a tool: the protocol's
    own JSON parsing keeps one value before the server sees the call.)"""
    from tests.unit.test_payment_proof import usdc_payment

    null_head = usdc_payment()
    null_head["evidence"]["facts"]["head_number"] = None
    number = usdc_payment()
    number["evidence"]["facts"]["transfers"] = 7
    vector = ROOT / "tests/vectors/receipts/finality_depth.json"
    final = json.loads(vector.read_text())["receipt"]
    return [
        (null_head, "evidence.facts.head_number"),
        (number, "evidence.facts.transfers: must be an array"),
        (json.dumps({**final, "settlement_id": "stl_\ud800"}), "settlement_id: is not valid"),
        ([final], "must be a JSON object, got list"),
    ]


async def test_bad_arguments_are_tool_errors_naming_the_field_and_serving_goes_on(
    module_anvil: Anvil, module_daemon: Daemon, http_mcp: str
) -> None:
    tx = module_anvil.send()
    module_anvil.receipt(tx)
    async with connect("http", module_daemon, http_mcp) as mcp:
        bad_hash = await mcp.call_tool("check_transaction", {"chain": CHAIN, "tx_hash": "0x12"})
        assert "tx_hash" in error_text(bad_hash)
        bad_chain = await mcp.call_tool(
            "register_settlement", {"chain": "nosuchchain", "tx_hash": tx}
        )
        assert "chain" in error_text(bad_chain)
        missing = await mcp.call_tool("may_commit", {})
        assert "settlement_id" in error_text(missing)
        bad_signer = await mcp.call_tool("verify_receipt", {"receipt": {}, "signer": "0xzz"})
        assert "signer" in error_text(bad_signer)
        for receipt, reason in malformed_receipts():
            answer = result(await mcp.call_tool("verify_receipt", {"receipt": receipt}))
            assert answer.get("valid") is False, (reason, answer)
            assert reason in answer["reason"], answer
        live = result(await mcp.call_tool("check_transaction", {"chain": CHAIN, "tx_hash": tx}))
        assert live["tx_hash"] == tx and live["block_number"] is not None


async def test_a_daemon_that_does_not_answer_is_a_tool_error_without_its_password(
    capfd: pytest.CaptureFixture[str],
) -> None:
    from mcp import Client, StdioServerParameters

    secret = "s3cr3t-pw"
    api = f"http://agent:{secret}@127.0.0.1:{free_port()}"
    target = StdioServerParameters(
        command=sys.executable,
        args=["-m", "watcher.cli", "mcp", "--api", api],
        env=subprocess_env(),
        cwd=str(ROOT),
    )
    async with Client(target) as mcp:
        first = error_text(await mcp.call_tool("get_settlement", {"settlement_id": "stl_x"}))
        assert "did not answer" in first and "127.0.0.1" in first and secret not in first
        again = await mcp.call_tool("may_commit", {"settlement_id": "stl_x"})
        assert secret not in error_text(again)
    assert secret not in capfd.readouterr().err
