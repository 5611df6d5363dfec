"""The settlement indexes on a column most rows leave NULL (the inclusion and replacing
blocks, the depth height, the next probe) hold only the rows that have it, on SQLite and
PostgreSQL: a block of 1,000 deposits (none of them has one) wrote four b-trees of NULL
keys per row. The reads on those columns compare them, so they still use the indexes: their
plans are checked here on SQLite (PostgreSQL's, over a big table, in
tests/integration/test_pg_query_plans.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, text

from tests.support.rigs import START_MS
from watcher.store import Store

PARTIAL = {
    "ix_settlements_confirm": "confirm_height",
    "ix_settlements_block": "block_number",
    "ix_settlements_replaced": "replaced_block_number",
    "ix_settlements_probe": "next_probe_at",
    # 0022: the watched rows by a deposit's block, and by an inclusion or replacing block.
    "ix_settlements_transfer_block": "transfer_block",
    "ix_settlements_watched_block": "block_number",
    "ix_settlements_watched_replaced": "replaced_block_number",
}


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    st = Store.open(store_url)
    st.ensure_chain("local", 31337, START_MS)
    yield st
    st.close()


def _definition(store: Store, name: str) -> str:
    with store.writer.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            found = text("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = :n")
        else:
            found = text(
                "SELECT indexdef FROM pg_indexes WHERE indexname = :n"
                " AND schemaname = current_schema()"
            )
        return str(conn.execute(found, {"n": name}).scalar_one())


def test_the_indexes_on_nullable_anchors_keep_only_rows_that_have_them(store: Store) -> None:
    for name, column in PARTIAL.items():
        definition = " ".join(_definition(store, name).replace("(", " ").replace(")", " ").split())
        assert f"WHERE {column} IS NOT NULL" in definition, definition


def test_the_watched_txs_index_keeps_only_watched_rows_that_are_not_address_watches(
    store: Store,
) -> None:
    definition = " ".join(_definition(store, "ix_settlements_watched_txs").split()).lower()
    assert "watching" in definition, definition
    assert "evm_payment" in definition and "evm_deposit" in definition, definition


def test_the_reads_on_those_columns_are_planned_on_them_on_sqlite(tmp_path: object) -> None:
    store = Store.open(f"sqlite:///{tmp_path}/finality.db")
    seen: list[tuple[str, Any]] = []

    def capture(_c: Any, _cur: Any, statement: str, params: Any, *_: Any) -> None:
        if "FROM settlements" in statement:
            seen.append((statement, params))

    try:
        store.ensure_chain("local", 31337, START_MS)
        event.listen(store.reader.engine, "before_cursor_execute", capture)
        event.listen(store.writer.engine, "before_cursor_execute", capture)
        store.recorded_blocks("local", 100, 10)  # blocks, then replacing blocks
        store.due_probes("local", START_MS, 10)
        store.finality_anchors("local", 100, 90)
        with store.block_txn("local", START_MS) as txn:
            txn.anchored_above(50)
        event.remove(store.reader.engine, "before_cursor_execute", capture)
        event.remove(store.writer.engine, "before_cursor_execute", capture)
        with store.writer.engine.connect() as conn:
            plans = [
                " ".join(r[-1] for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, p))
                for sql, p in seen
            ]
    finally:
        store.close()
    assert len(plans) == 5, seen
    blocks, replaced, probes, anchors, above = plans
    assert "USING INDEX ix_settlements_block (chain=? AND block_number<?)" in blocks
    assert "USING INDEX ix_settlements_replaced (chain=? AND replaced_block_number<?)" in replaced
    assert "USING INDEX ix_settlements_probe (chain=? AND watching=? AND next_probe_at<?)" in (
        probes
    )
    assert "SCAN settlements" not in anchors, anchors
    assert "ix_settlements_block (chain=? AND block_number>?)" in above
    assert "ix_settlements_replaced (chain=? AND replaced_block_number>?)" in above
