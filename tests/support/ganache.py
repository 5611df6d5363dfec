"""A real Ganache 7.9.2 node for tests: start, drive, stop.

``scripts/bootstrap.sh`` installs ``ganache@7.9.2`` into ``.tools/ganache``; it runs on the
Node.js 22 of ``.tools/node22`` (its native WebSocket module has no build for that Node.js, so
Ganache says it falls back to its JavaScript server: HTTP JSON-RPC is the same). Started as a
user starts it, with deterministic accounts (``--wallet.deterministic``), unchanged.

What it does not offer, and other differences from anvil: docs/rpc.md, "Node
implementations and their differences".
"""

from __future__ import annotations

from tests.support.anvil import ROOT
from tests.support.devnode import NODE22_BIN, DevNode
from tests.support.node_process import port_or_free

GANACHE_DIR = ROOT / ".tools/ganache"
GANACHE_BIN = GANACHE_DIR / "node_modules/ganache/dist/node/cli.js"


def ganache_installed() -> bool:
    """True when bootstrap installed Ganache and its Node.js."""
    return GANACHE_BIN.exists() and (NODE22_BIN / "node").exists()


class Ganache(DevNode):
    """One ``ganache`` process on a free loopback port (chain id 1337, instamine)."""

    name = "ganache"
    chain_id = 1337

    def __init__(self, port: int | None = None) -> None:
        if not ganache_installed():
            raise FileNotFoundError(
                f"ganache not installed at {GANACHE_BIN}; run scripts/bootstrap.sh"
            )
        port = port_or_free(port)
        command = [
            str(NODE22_BIN / "node"),
            str(GANACHE_BIN),
            "--server.host",
            "127.0.0.1",
            "--server.port",
            str(port),
            "--chain.chainId",
            str(self.chain_id),
            "--wallet.deterministic",
            "--logging.quiet",
        ]
        super().__init__(command, GANACHE_DIR, port)

    def automine(self, on: bool) -> None:
        self.rpc("miner_start" if on else "miner_stop")
