"""kill -9 in the middle of a catch-up whose blocks carry watched txs: a catch-up commits
its blocks in runs (one transaction for many blocks, watched ones included), so a crash
leaves the store at a run's end: every block up to the stored head with its watched txs'
inclusions, none above it. The restarted daemon finishes from there and each settlement is
confirmed at its own block and depth."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest

from tests.e2e.catch_up_helpers import registered_while_down
from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon, wait_for
from watcher.store import Store

pytestmark = pytest.mark.anvil

TXS = 60
GAP = 9
"""Empty blocks after each watched one: 600 blocks missed, 20 fetched a poll."""


def stored_head(daemon: Daemon) -> int | None:
    """The head the daemon's store holds (read from the file, the daemon being busy)."""
    with sqlite3.connect(daemon.db_path, timeout=5.0) as conn:
        row = conn.execute("SELECT head_number FROM chains WHERE name = ?", (CHAIN,)).fetchone()
    return None if row is None else row[0]


def test_killed_mid_catch_up_keeps_whole_runs_and_finishes_after_restart(
    anvil: Anvil, make_daemon: Callable[..., Daemon]
) -> None:
    daemon = make_daemon(anvil.url, max_blocks_per_poll=20, poll_interval_s=0.1)
    first = daemon.register(anvil.send())["settlement_id"]
    anvil.mine(3)
    daemon.wait_verdict(first, "FINALITY_CONFIRMED")
    daemon.kill9()
    start = stored_head(daemon)
    assert start is not None
    ids, blocks = registered_while_down(anvil, daemon.store_url, TXS, GAP)
    target = anvil.head()

    daemon.spawn()
    wait_for(lambda: (stored_head(daemon) or 0) > start, 60.0, what="a first committed run")
    daemon.kill9()

    store = Store.open(daemon.store_url)
    try:
        record = store.chain(CHAIN)
        assert record is not None and record.head_number is not None
        head = record.head_number
        assert start < head < target, "the catch-up was not interrupted"
        # A whole run or nothing: every watched tx at or below the head is recorded, none above.
        for tx, sid in ids.items():
            expected = blocks[tx] if blocks[tx] <= head else None
            assert store.settlement(sid).block_number == expected, (tx, blocks[tx], head)
        numbers = [n for n, _, _, _ in store.headers(CHAIN)]
        assert numbers == list(range(numbers[0], head + 1))
    finally:
        store.close()

    daemon.start()
    for tx, sid in ids.items():
        view = daemon.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=60.0)
        assert view["block_number"] == blocks[tx]
    assert daemon.head() == target
