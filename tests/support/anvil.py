"""A real anvil node for tests and benchmarks: start, drive, stop.

Nothing here fakes the chain: every helper sends real JSON-RPC to a real anvil process.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any, cast

import requests

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
ANVIL_BIN = ROOT / ".tools/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"

__all__ = ["ANVIL_BIN", "ROOT", "Anvil", "free_port", "in_ci"]
"""``free_port`` lives in tests/support/ports.py; it is re-exported for the old imports."""


class Anvil:
    """One anvil process on a free loopback port."""

    def __init__(self, *args: str, port: int | None = None) -> None:
        if not ANVIL_BIN.exists():
            raise FileNotFoundError(f"anvil not installed at {ANVIL_BIN}; run scripts/bootstrap.sh")
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = args
        self._session = requests.Session()
        self._id = 0
        self.proc = subprocess.Popen(
            [str(ANVIL_BIN), "--host", "127.0.0.1", "--port", str(self.port), "--silent", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 15
        while True:
            try:
                self.rpc("eth_chainId")
                break
            except requests.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    raise RuntimeError(f"anvil did not start: {err}") from None
                time.sleep(0.05)
        self.accounts: list[str] = self.rpc("eth_accounts")

    def rpc(self, method: str, *params: Any) -> Any:
        """Send one JSON-RPC request; raise on a JSON-RPC error."""
        self._id += 1
        answer = self._session.post(
            self.url,
            json={"jsonrpc": "2.0", "id": self._id, "method": method, "params": list(params)},
            timeout=30,
        ).json()
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    # -- chain helpers -------------------------------------------------------------------

    def head(self) -> int:
        """Current block number."""
        return int(self.rpc("eth_blockNumber"), 16)

    def block(self, tag: int | str = "latest") -> dict[str, Any]:
        """A block by number or tag (hashes only)."""
        block = self.rpc("eth_getBlockByNumber", hex(tag) if isinstance(tag, int) else tag, False)
        return cast(dict[str, Any], block)

    def mine(self, blocks: int = 1) -> None:
        """Mine ``blocks`` blocks now."""
        self.rpc("anvil_mine", hex(blocks))

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
        """Wait for a receipt (automine may lag the send)."""
        deadline = time.monotonic() + timeout
        while True:
            receipt = self.rpc("eth_getTransactionReceipt", tx_hash)
            if receipt is not None:
                return dict(receipt)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no receipt for {tx_hash}")
            time.sleep(0.02)

    def raw_tx(self, tx_hash: str) -> str:
        """The signed raw bytes of a known tx (to re-include it after a reorg)."""
        return str(self.rpc("eth_getRawTransactionByHash", tx_hash))

    def reorg(self, depth: int, txs: list[tuple[str, int]] | None = None) -> None:
        """Replace the last ``depth`` blocks; ``txs`` are (raw tx, block offset) to include."""
        self.rpc("anvil_reorg", depth, [[raw, offset] for raw, offset in (txs or [])])

    def stop(self) -> None:
        """Kill the process."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc.stderr:
            self.proc.stderr.close()
        self._session.close()

    def __enter__(self) -> Anvil:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def in_ci() -> bool:
    """CI sets CI=true: there a missing service is a failure, never a skip."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")
