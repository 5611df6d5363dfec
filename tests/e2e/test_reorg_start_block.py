"""The daemon as a process, cold-started on a chain with history, survives a reorg of the
very block it started from and of blocks below it: the tx confirms, the reorg is recorded
with what is known (the blocks known replaced, an ancestor that is really common, never the
new branch's block taken for one), and the chain stays healthy. (The in-process tests in tests/integration/test_reorg_beyond_window.py
cover depths, restarts and reorgs below the window.)"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.anvil import Anvil
from tests.support.daemon import Daemon

pytestmark = pytest.mark.anvil


@pytest.mark.parametrize("depth", [2, 5])
def test_daemon_cold_started_at_the_tip_follows_a_reorg_of_it(
    start_anvil: Callable[..., Anvil], make_daemon: Callable[..., Daemon], depth: int
) -> None:
    anvil = start_anvil("--no-mining")
    anvil.mine(20)
    old = {n: anvil.block(n)["hash"] for n in range(21)}
    start_hash = old[20]
    daemon = make_daemon(anvil.url, confirmations=3)
    daemon.wait_head(20, start_hash)
    tx = anvil.send()
    raw = anvil.raw_tx(tx)
    sid = daemon.register(tx)["settlement_id"]

    anvil.reorg(depth, [(raw, depth - 1)])  # replaces 21-depth..20, the tx in the new tip
    anvil.mine(2)
    done = daemon.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=20)

    assert (done["block_number"], done["block_hash"]) == (20, anvil.block(20)["hash"])
    [reorg] = daemon.get("/v1/reorgs").json()
    assert reorg["old_head"] == {"number": 20, "hash": start_hash}
    # The daemon knew block 20 and, from its parentHash, block 19: both are known replaced.
    assert reorg["depth"] >= 2
    replaced = {r["number"]: r["old_hash"] for r in reorg["replaced"]}
    assert replaced == {19: old[19], 20: old[20]}
    # Never a false ancestor: a block on both branches, below every replaced one.
    ancestor = reorg["common_ancestor"]
    assert ancestor["number"] <= 20 - depth
    assert ancestor["hash"] == old[ancestor["number"]] == anvil.block(ancestor["number"])["hash"]
    chain = daemon.chain_info()
    assert chain["last_error"] is None
    assert daemon.get("/healthz").status_code == 200
