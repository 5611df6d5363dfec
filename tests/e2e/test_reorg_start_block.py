"""The daemon as a process, cold-started on a chain with history, survives a reorg of the
very block it started from (issue 10, item 1): the tx confirms, the reorg is recorded, and
the chain stays healthy. (The in-process tests in tests/integration/test_reorg_beyond_window.py
cover depths, restarts and reorgs below the window.)"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.anvil import Anvil
from tests.support.daemon import Daemon

pytestmark = pytest.mark.anvil


def test_daemon_cold_started_at_the_tip_follows_a_reorg_of_it(
    start_anvil: Callable[..., Anvil], make_daemon: Callable[..., Daemon]
) -> None:
    anvil = start_anvil("--no-mining")
    anvil.mine(20)
    start_hash = anvil.block(20)["hash"]
    daemon = make_daemon(anvil.url, confirmations=3)
    daemon.wait_head(20, start_hash)
    tx = anvil.send()
    raw = anvil.raw_tx(tx)
    sid = daemon.register(tx)["settlement_id"]

    anvil.reorg(2, [(raw, 1)])  # replaces 19 and 20, the tx in the new tip
    anvil.mine(2)
    done = daemon.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=20)

    assert (done["block_number"], done["block_hash"]) == (20, anvil.block(20)["hash"])
    [reorg] = daemon.get("/v1/reorgs").json()
    assert reorg["old_head"] == {"number": 20, "hash": start_hash}
    chain = daemon.chain_info()
    assert chain["last_error"] is None
    assert daemon.get("/healthz").status_code == 200
