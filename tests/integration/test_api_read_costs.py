"""What the hot API routes cost the store (performance under load): a settlement
read is one statement, with the head it shows read in it; a batch of 1,000 registrations is
a handful of statements, not one head query per item; and a batch costs SQLite the same work
however many settlements are already stored (the rows are looked up through the unique
index, not by scanning the table).

Real parts: the daemon's service and API under uvicorn on loopback (tests/support/
sources_app.py), its SQLite store; statements are counted at the store's own engines and
SQLite's work is counted in virtual-machine steps (deterministic, unlike a timing).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from tests.support.sources_app import LiveApp, chain_app
from watcher.store import Store
from watcher.store.listing_store import listing
from watcher.store.records import NewSettlement

CHAIN = "local"


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveApp]:
    with chain_app(tmp_path) as app:
        yield app


class Statements:
    """The SELECTs the store's engines run while counting (a context manager), and how many
    statements the store's raw read ran (``fast``: watcher/store/fast_read.py)."""

    def __init__(self, store: Store) -> None:
        self.engines = {store.writer.engine, store.reader.engine}
        self.selects: list[str] = []
        self.reader = store.reader
        self.fast = -store.reader.fast_statements

    def _seen(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            self.selects.append(statement)

    def __enter__(self) -> Statements:
        for engine in self.engines:
            event.listen(engine, "before_cursor_execute", self._seen)
        return self

    def __exit__(self, *exc: object) -> None:
        self.fast += self.reader.fast_statements
        for engine in self.engines:
            event.remove(engine, "before_cursor_execute", self._seen)


def _hashes(count: int) -> list[str]:
    return ["0x" + secrets.token_hex(32) for _ in range(count)]


def _batch(live: LiveApp, hashes: list[str]) -> list[dict[str, Any]]:
    items = [{"chain": CHAIN, "tx_hash": h} for h in hashes]
    answer = live.http.post("/v1/settlements/batch", json={"items": items}, timeout=60)
    assert answer.status_code == 200, answer.text
    results: list[dict[str, Any]] = answer.json()["results"]
    return results


def test_a_read_is_one_statement_and_shows_the_depth_of_the_head_read_with_it(
    live: LiveApp,
) -> None:
    store = live.service.store
    [result] = _batch(live, _hashes(1))
    sid = result["settlement"]["settlement_id"]
    with store.block_txn(CHAIN, live.service.clock()) as txn:
        txn.set_inclusion(store.settlement(sid), 8, "0x" + "8" * 64, 0, 1, None, None)
        txn.put_header(10, "0x" + "a" * 64, "0x" + "9" * 64, 0, keep=64)
    with Statements(store) as seen:
        view = live.http.get(f"/v1/settlements/{sid}").json()
    assert (view["head_number"], view["block_number"], view["confirmations"]) == (10, 8, 3)
    assert len(seen.selects) + seen.fast == 1, seen.selects  # the row and its head, together
    missing = live.http.get("/v1/settlements/" + "0" * 64)
    assert missing.status_code == 404 and "no settlement" in missing.json()["error"]


def test_a_batch_of_1000_is_a_few_statements_and_answers_as_a_read_does(live: LiveApp) -> None:
    with Statements(live.service.store) as seen:
        results = _batch(live, _hashes(1000))
    assert [r["status"] for r in results] == [201] * 1000
    # Looking up what is stored (2 chunks), reading the rows back (2), the heads once:
    # before, every item's view read its chain's head (1,000 more).
    assert len(seen.selects) <= 6, len(seen.selects)
    first = results[0]
    assert (first["index"], first["error"], first["fields"]) == (0, None, [])
    read = live.http.get(f"/v1/settlements/{first['settlement']['settlement_id']}").json()
    assert first["settlement"] == read


def _steps(store: Store, news: list[NewSettlement]) -> int:
    """SQLite virtual-machine steps (in hundreds) that registering ``news`` takes."""
    counted = [0]

    def tick() -> int:
        counted[0] += 1
        return 0  # go on

    def on_checkout(dbapi_conn: Any, *_: Any) -> None:
        dbapi_conn.set_progress_handler(tick, 100)

    engine = store.writer.engine
    store.writer.dispose()  # pooled connections get the handler at their next checkout
    event.listen(engine, "checkout", on_checkout)
    try:
        listing(store).register_batch(news)
    finally:
        event.remove(engine, "checkout", on_checkout)
    return counted[0]


def test_a_batch_costs_sqlite_the_same_however_many_settlements_are_stored(
    live: LiveApp,
) -> None:
    store, clock = live.service.store, live.service.clock

    def news(count: int) -> list[NewSettlement]:
        from watcher.settlements import Registration, new_settlement

        chain = live.service.config.chain(CHAIN)
        return [
            new_settlement(Registration(chain=chain, tx_hash=h), clock()) for h in _hashes(count)
        ]

    few = _steps(store, news(200))
    for _ in range(10):  # 10,000 settlements stored
        listing(store).register_batch(news(1000))
    many = _steps(store, news(200))
    # A row-value IN scanned the table: 200 items cost ~25x more with 10,000 rows stored.
    assert many < few * 1.5, (few, many)
