"""The daemon as a process against Hardhat 3 (EDR) and Ganache 7.9.2, unchanged.

What an acceptance test saw: the daemon started, but the first block holding a watched tx
aborted every poll (no ``eth_getBlockReceipts``), the head stayed put while the node moved
on, and nothing was ever confirmed or receipted. Here a user's whole path runs over HTTP:
register, the head follows the node, finality, a receipt that verifies offline.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guard.verify import verify_receipt
from tests.support.anvil import in_ci
from tests.support.daemon import Daemon, wait_for
from tests.support.devnode import DevNode
from tests.support.ganache import Ganache, ganache_installed
from tests.support.hardhat import Hardhat, hardhat_installed

pytestmark = pytest.mark.anvil

NODES = {"hardhat": (Hardhat, hardhat_installed), "ganache": (Ganache, ganache_installed)}


@pytest.fixture(params=list(NODES))
def node(request: pytest.FixtureRequest) -> Iterator[DevNode]:
    cls, installed = NODES[request.param]
    if not installed():
        if in_ci():
            pytest.fail(f"{request.param} is required under CI=true (scripts/bootstrap.sh)")
        pytest.skip(f"{request.param} not installed")
    with cls() as started:
        yield started


def test_daemon_follows_confirms_and_receipts_on_the_node(node: DevNode, tmp_path: Path) -> None:
    with Daemon(tmp_path, node.url, chain_id=node.chain_id) as daemon:
        tx = node.send()
        node.receipt(tx)
        sid = daemon.register(tx, confirmations=3)["settlement_id"]

        def confirmed() -> dict[str, Any] | None:
            view = daemon.settlement(sid)
            if view["verdict"] == "FINALITY_CONFIRMED" and view["receipt"] is not None:
                return view
            if node.head() < 4:
                node.mine()
            return None

        view = wait_for(confirmed, 20, interval=0.2, what="FINALITY_CONFIRMED and its receipt")
        assert view["confirmations"] >= 3
        daemon.wait_head(node.head())
        info = daemon.chain_info()
        assert info["last_error"] is None and info["healthy"] is True

        answer = daemon.get(f"/v1/settlements/{sid}/receipt")
        assert answer.status_code == 200, answer.text
        signers = [s["address"] for s in daemon.get("/v1/signers").json()]
        verified = verify_receipt(answer.json(), trusted_signers=signers)
        assert (verified.kind, verified.tx_hash) == ("settlement_finality_receipt", tx)
