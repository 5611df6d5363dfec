"""Txs mined and registered while a daemon is down, for the catch-up tests."""

from __future__ import annotations

import time

from tests.integration.helpers import wait_included
from tests.support.anvil import Anvil
from tests.support.rigs import chain_config, register_tx
from watcher.store import Store


def registered_while_down(
    anvil: Anvil, store_url: str, count: int, mine_after: int
) -> tuple[dict[str, str], dict[str, int]]:
    """``count`` value transfers, each followed by ``mine_after`` empty blocks, then registered
    in the stopped daemon's store directly (as another instance's API would): (tx hash →
    settlement id, tx hash → its block)."""
    txs = []
    for value in range(1, count + 1):
        txs.append(anvil.send(value=value))
        anvil.mine(mine_after)
    blocks = {tx: wait_included(anvil, tx) for tx in txs}
    store = Store.open(store_url)
    try:
        now = time.time_ns() // 1_000_000
        config = chain_config(anvil)
        ids = {tx: register_tx(store, config, tx, now).settlement_id for tx in txs}
    finally:
        store.close()
    return ids, blocks
