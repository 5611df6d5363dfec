"""What every node the tests run shares (anvil, Hardhat, Ganache): a process on a free
loopback port, started and waited for until it answers ``eth_chainId``, driven with real
JSON-RPC, killed at the end. The subclasses give the command line and what only their node
can do (``anvil_reorg``, ``evm_snapshot`` reorgs, mining switches).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self, cast

import requests

from tests.support.ports import free_port


class NodeProcess:
    """One JSON-RPC node process on a loopback port, with the helpers tests drive it by."""

    name = "node"
    """How errors name the node."""

    def __init__(
        self,
        command: Sequence[str],
        port: int,
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        start_s: float = 15.0,
        poll_s: float = 0.05,
    ) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{self.port}"
        self._session = requests.Session()
        self._id = 0
        self.proc = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self._wait_ready(start_s, poll_s)
        self.accounts: list[str] = self.rpc("eth_accounts")

    def _wait_ready(self, start_s: float, poll_s: float) -> None:
        """Until the node answers (its stderr in the error when it dies or takes too long)."""
        deadline = time.monotonic() + start_s
        while True:
            try:
                self.rpc("eth_chainId")
                return
            except requests.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.proc.kill()
                    err = self.proc.stderr.read().decode()[-2000:] if self.proc.stderr else ""
                    raise RuntimeError(f"{self.name} did not start: {err}") from None
                time.sleep(poll_s)

    def rpc(self, method: str, *params: Any) -> Any:
        """Send one JSON-RPC request; raise on a JSON-RPC error."""
        self._id += 1
        answer = self._session.post(
            self.url,
            json={"jsonrpc": "2.0", "id": self._id, "method": method, "params": list(params)},
            timeout=30,
        ).json()
        if "error" in answer:
            raise RuntimeError(self.error_message(method, answer["error"]))
        return answer["result"]

    def error_message(self, method: str, error: Any) -> str:
        """The text of the error raised for a JSON-RPC error answer."""
        return f"{method}: {error}"

    # -- chain helpers -------------------------------------------------------------------

    def head(self) -> int:
        """Current block number."""
        return int(self.rpc("eth_blockNumber"), 16)

    def block(self, tag: int | str = "latest") -> dict[str, Any]:
        """A block by number or tag (hashes only)."""
        block = self.rpc("eth_getBlockByNumber", hex(tag) if isinstance(tag, int) else tag, False)
        return cast(dict[str, Any], block)

    def mine(self, blocks: int = 1) -> None:
        """Mine ``blocks`` blocks now, one ``evm_mine`` each (pending txs go in the first)."""
        for _ in range(blocks):
            self.rpc("evm_mine")

    def send(self, sender: int = 0, to: int = 1, value: int = 1, **extra: Any) -> str:
        """Send a value transfer from account ``sender``; returns the tx hash."""
        tx = {"from": self.accounts[sender], "to": self.accounts[to], "value": hex(value)}
        tx.update(extra)
        return str(self.rpc("eth_sendTransaction", tx))

    def send_revert(self, sender: int = 0) -> str:
        """A contract creation whose init code reverts: mines with status 0."""
        tx = {"from": self.accounts[sender], "data": "0x60006000fd", "gas": hex(100_000)}
        return str(self.rpc("eth_sendTransaction", tx))

    def receipt(self, tx_hash: str, timeout: float = 10.0) -> dict[str, Any]:
        """Wait for a receipt (automining may lag the send), at most ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            receipt = self.rpc("eth_getTransactionReceipt", tx_hash)
            if receipt is not None:
                return dict(receipt)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no receipt for {tx_hash}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Kill the process."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc.stderr:
            self.proc.stderr.close()
        self._session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def port_or_free(port: int | None) -> int:
    """``port``, or a free loopback port."""
    return port or free_port()
