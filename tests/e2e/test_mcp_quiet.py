"""``finality mcp`` over stdio leaves the agent host's stderr alone: nothing below a warning
unless asked (``--log-level debug`` shows every HTTP request to the daemon).

The server is driven by hand over its stdin and stdout (newline-delimited JSON-RPC, as an
agent host does) so its stderr can be read whole after it exits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from tests.support.anvil import ROOT, Anvil
from tests.support.daemon import CHAIN, Daemon, subprocess_env


def serve_one_call(daemon: Daemon, tx_hash: str, *flags: str) -> tuple[dict[str, Any], str]:
    """Initialize, call ``check_transaction`` once, close stdin: (the call's result, stderr)."""
    messages: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "check_transaction",
                "arguments": {"chain": CHAIN, "tx_hash": tx_hash},
            },
        },
    ]
    server = subprocess.Popen(
        [sys.executable, "-m", "watcher.cli", "mcp", "--api", daemon.url, *flags],
        cwd=ROOT,
        env=subprocess_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    answers: dict[int, dict[str, Any]] = {}
    try:
        for message in messages:
            server.stdin.write(json.dumps(message) + "\n")
            server.stdin.flush()
            if "id" in message:  # wait for its answer before the next message
                while message["id"] not in answers:
                    line = server.stdout.readline()
                    assert line, "the server closed its stdout"
                    answer = json.loads(line)
                    answers[answer.get("id", -1)] = answer
    finally:
        _, stderr = server.communicate(timeout=60)
    return answers[2]["result"], stderr


def test_the_stdio_server_writes_nothing_to_stderr_unless_asked(
    module_anvil: Anvil, module_daemon: Daemon
) -> None:
    tx = module_anvil.send()
    module_anvil.receipt(tx)
    result, stderr = serve_one_call(module_daemon, tx)
    assert not result.get("isError"), result
    assert result["structuredContent"]["tx_hash"] == tx
    assert stderr == ""

    _, chatty = serve_one_call(module_daemon, tx, "--log-level", "debug")
    assert "HTTP Request: GET" in chatty  # what the quiet default keeps out
