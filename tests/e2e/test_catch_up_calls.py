"""A daemon's catch-up asks the node for each block once.

The daemon as shipped (a process, every header re-hashed and every watched block's receipts
checked against its roots) is down while 600 blocks are made, 20 of them carrying a watched
tx; restarted behind a real counting proxy (bench/proxy.py), it catches up in polls of 500
blocks. The tracker reads each block with its txs once; the receipts check of a watched
block must use the block the catch-up already holds, not ask for it again by hash (it did
for a block more than the facts' index of 128 blocks before its poll's end). Every watched
tx still ends ``FINALITY_CONFIRMED`` at its block.

Each tx's finality receipt, built after its verdict when the store's window has long moved
past its block, asks the node for nothing again either: its header chain comes from the
span kept for its block (watcher/receipts/spans.py: before, 45 of the 600 blocks were read
again by number, headers only) and its proofs were cut when the engine checked its block's
receipts (watcher/receipts/ahead.py: before, some blocks' receipts were asked again, and
the receipts thread fetched the tries of blocks the facts had let go).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest

from bench.catchup_calls import asked_twice, block_hashes
from bench.proxy import CountingProxy
from tests.e2e.catch_up_helpers import registered_while_down
from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, wait_for

pytestmark = pytest.mark.anvil

TXS = 20
GAP = 30
"""Blocks per watched tx (the first holds it): 600 blocks missed, more than one poll."""


def _receipt_of(daemon: Daemon, settlement_id: str) -> object:
    """The settlement's receipt as the API shows it (None until built)."""
    return daemon.settlement(settlement_id)["receipt"]


def test_a_catch_up_asks_for_each_block_with_its_txs_once(
    anvil: Anvil, make_daemon: Callable[..., Daemon]
) -> None:
    proxy = CountingProxy(anvil.url)
    try:
        daemon = make_daemon(proxy.url, heads="poll")
        anvil.mine(3)
        daemon.wait_head(anvil.head())
        daemon.terminate()
        ids, blocks = registered_while_down(anvil, daemon.store_url, TXS, GAP - 1)
        target = anvil.head()
        with proxy._lock:
            proxy.calls.clear()
            proxy.log.clear()

        daemon.start()
        for tx, sid in ids.items():
            view = daemon.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=60.0)
            assert view["block_number"] == blocks[tx]
        for sid in ids.values():  # what building the receipts asks is counted too
            wait_for(partial(_receipt_of, daemon, sid), 60.0, what=f"{sid}'s receipt")
        daemon.wait_head(target)
        with proxy._lock:
            log = list(proxy.log)
    finally:
        proxy.close()

    hash_of = block_hashes(anvil, target)
    twice = asked_twice(log, hash_of, full=True)
    assert twice == {}, f"{len(twice)} blocks asked for with their txs more than once"
    asked = {str(p[0]) for m, p in log if m == "eth_getBlockByNumber" and p[-1] is True}
    # (the last one is the node's ``latest``, read by that tag)
    missed = set(range(target - TXS * GAP + 1, target)) - {
        int(n, 16) for n in asked if n.startswith("0x")
    }
    assert not missed, f"blocks never read: {sorted(missed)[:5]}"
    again = {k: n for k, n in asked_twice(log, hash_of).items() if k not in twice}
    assert again == {}, f"{len(again)} blocks' headers read again (a receipt's header chain)"
    asked_receipts = [str(p[0]).lower() for m, p in log if m == "eth_getBlockReceipts"]
    watched = {hash_of[b] for b in blocks.values()}
    assert watched <= set(asked_receipts), "a watched block's receipts were never checked"
    receipts_twice = len(asked_receipts) - len(set(asked_receipts))
    assert receipts_twice == 0, f"{receipts_twice} receipts asked again (a receipt's proofs)"
