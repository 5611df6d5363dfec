"""A real anvil node for tests and benchmarks: start, drive, stop.

Nothing here fakes the chain: every helper sends real JSON-RPC to a real anvil process. The
process, the RPC and the send/receipt helpers are :class:`NodeProcess`'s (shared with Hardhat
and Ganache); anvil adds its own mining and reorgs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from tests.support.node_process import NodeProcess, port_or_free
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
ANVIL_BIN = ROOT / ".tools/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"

__all__ = ["ANVIL_BIN", "ROOT", "Anvil", "free_port", "in_ci"]
"""``free_port`` lives in tests/support/ports.py; it is re-exported for the old imports."""


class Anvil(NodeProcess):
    """One anvil process on a free loopback port."""

    name = "anvil"

    serving: ClassVar[set[str]] = set()
    """The URLs of the anvils this process runs now: a daemon pointed straight at one can be
    woken by its WebSocket ``newHeads`` (tests/support/daemon.py), one behind a proxy not."""

    def __init__(self, *args: str, port: int | None = None) -> None:
        if not ANVIL_BIN.exists():
            raise FileNotFoundError(f"anvil not installed at {ANVIL_BIN}; run scripts/bootstrap.sh")
        self.args = args
        port = port_or_free(port)
        command = [str(ANVIL_BIN), "--host", "127.0.0.1", "--port", str(port), "--silent", *args]
        super().__init__(command, port)
        Anvil.serving.add(self.url)

    def stop(self) -> None:
        """Kill the process (its URL no longer serves)."""
        Anvil.serving.discard(self.url)
        super().stop()

    def mine(self, blocks: int = 1) -> None:
        """Mine ``blocks`` blocks now (one ``anvil_mine``)."""
        self.rpc("anvil_mine", hex(blocks))

    def raw_tx(self, tx_hash: str) -> str:
        """The signed raw bytes of a known tx (to re-include it after a reorg)."""
        return str(self.rpc("eth_getRawTransactionByHash", tx_hash))

    def reorg(self, depth: int, txs: list[tuple[str, int]] | None = None) -> None:
        """Replace the last ``depth`` blocks; ``txs`` are (raw tx, block offset) to include."""
        self.rpc("anvil_reorg", depth, [[raw, offset] for raw, offset in (txs or [])])


def in_ci() -> bool:
    """CI sets CI=true: there a missing service is a failure, never a skip."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")
