"""A real Hardhat 3 node (EDR) for tests: start, drive, stop.

``scripts/bootstrap.sh`` installs ``hardhat`` (pinned) into ``.tools/hardhat`` with a
``package.json`` of ``"type": "module"`` and a ``hardhat.config.js`` whose ``node`` network
is ``edr-simulated``, and Node.js 22 (Hardhat 3 needs it) into ``.tools/node22``. The node
is started as a user starts it, ``hardhat node --hostname 127.0.0.1 --port P``, unchanged.

What it does not offer, and other differences from anvil: docs/rpc.md, "Node
implementations and their differences".
"""

from __future__ import annotations

from tests.support.anvil import ROOT
from tests.support.devnode import NODE22_BIN, DevNode
from tests.support.node_process import port_or_free

HARDHAT_DIR = ROOT / ".tools/hardhat"
HARDHAT_BIN = HARDHAT_DIR / "node_modules/.bin/hardhat"


def hardhat_installed() -> bool:
    """True when bootstrap installed Hardhat and its Node.js."""
    return HARDHAT_BIN.exists() and (NODE22_BIN / "node").exists()


class Hardhat(DevNode):
    """One ``hardhat node`` process on a free loopback port (chain id 31337, automining)."""

    name = "hardhat"
    chain_id = 31337

    def __init__(self, port: int | None = None) -> None:
        if not hardhat_installed():
            raise FileNotFoundError(
                f"hardhat not installed at {HARDHAT_BIN}; run scripts/bootstrap.sh"
            )
        port = port_or_free(port)
        command = [
            str(NODE22_BIN / "node"),
            str(HARDHAT_BIN),
            "node",
            "--network",
            "node",
            "--hostname",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        super().__init__(command, HARDHAT_DIR, port)

    def automine(self, on: bool) -> None:
        self.rpc("evm_setAutomine", on)
