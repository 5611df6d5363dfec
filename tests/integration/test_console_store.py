"""The console's reads in the store (``watcher.store.console_store``) on SQLite and on
PostgreSQL: time to final over a window and per owner, block times of the stored window, and
the newest event's id."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.helpers import numbered_settlement
from watcher.store import Store
from watcher.store.console_store import final_durations, header_times, last_event_id


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = Store.open(store_url)
    yield opened
    opened.close()


def _decide(store: Store, n: int, verdict: str, now: int, owner: str = "anonymous") -> None:
    rec, _ = store.register(numbered_settlement(n, owner=owner))
    with store.block_txn("local", now) as txn:
        txn.save_decision(rec, verdict, rec.digest, {"verdict": verdict}, False, terminal=True)


def test_time_to_final_counts_the_owners_confirmed_ones_in_the_window(store: Store) -> None:
    store.ensure_chain("local", 31337, 0)
    _decide(store, 1, "FINALITY_CONFIRMED", now=9_000)  # took 8 s
    _decide(store, 2, "FINALITY_CONFIRMED", now=5_000)  # took 4 s
    _decide(store, 3, "SETTLEMENT_FAILED", now=6_000)  # not final: not counted
    _decide(store, 4, "FINALITY_CONFIRMED", now=2_000, owner="other")
    store.register(numbered_settlement(5))

    assert final_durations(store.reader, 0, "anonymous") == {"local": [4_000, 8_000]}
    assert final_durations(store.reader, 6_000, "anonymous") == {"local": [8_000]}
    assert final_durations(store.reader, 0, "other") == {"local": [1_000]}
    assert final_durations(store.reader, 10_000, "anonymous") == {}


def test_block_times_and_the_newest_event(store: Store) -> None:
    store.ensure_chain("local", 31337, 0)
    assert last_event_id(store.reader) == 0
    with store.block_txn("local", 1_000) as txn:
        for number in (10, 11, 12):
            txn.put_header(number, f"0x{number:064x}", f"0x{number - 1:064x}", 1_700 + number, 64)
        txn.record_event("reorg", "warning", {})
        newest = txn.record_event("settlement_confirmed", "info", {})
    assert header_times(store.reader, "local", 11, 20) == {11: 1_711, 12: 1_712}
    assert header_times(store.reader, "other", 10, 12) == {}
    assert last_event_id(store.reader) == newest
