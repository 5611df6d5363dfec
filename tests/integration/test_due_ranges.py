"""The reads a block makes to find what it may decide are planned on index ranges on SQLite,
none of them walking every watched row of the chain: with a ``finalized`` (and ``safe``)
height, the due txs (one block, and a catch-up's stretch), the ripe deposits and the rest of
the due payments; and every poll's read of the settlements registered since its last look.

Why: a chain whose rule is the ``finalized`` tag keeps every deposit watched until the tag
reaches it, 64 blocks on Ethereum: at 1,000 deposits a block, 64,000 watched rows that each
of these reads walked at every block (bench/README.md, "Deposits on a chain whose rule is
the finalized tag"). Their answers are checked elsewhere (tests/integration/
test_deposits_engine.py, test_deposits_tag_rules.py, test_finality_modes.py,
test_deposit_keys_migration.py); here, how SQLite means to find them.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import event
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from guard.payment import ADDRESS_KINDS
from tests.support.rigs import START_MS
from watcher.store import Store
from watcher.store import block_queries as queries
from watcher.store.deposits_ripe import _query as ripe_query
from watcher.store.payments_store import payments_due
from watcher.store.schema import WATCHED_TXS

WALK = "(chain=? AND watching=?)"
"""An index searched on the chain and ``watching`` alone: every watched row."""


def _plan(store: Store, sql: str, params: Any) -> str:
    with store.writer.engine.connect() as conn:
        rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params)
        return " | ".join(str(r[-1]) for r in rows)


def _compiled(store: Store, statement: ClauseElement) -> tuple[str, tuple[int, ...]]:
    compiled = cast(SQLCompiler, statement.compile(dialect=store.writer.engine.dialect))
    return str(compiled), (1,) * len(compiled.positiontup or ())


def test_a_blocks_reads_with_a_finalized_height_take_index_ranges(tmp_path: object) -> None:
    store = Store.open(f"sqlite:///{tmp_path}/finality.db")
    try:
        store.ensure_chain("local", 31337, START_MS)
        plans = {
            name: _plan(store, *_compiled(store, statement))
            for name, statement in {
                "due txs, a stretch": queries.due_span(True),
                "ripe deposits": ripe_query(True, True),
            }.items()
        }
        seen: list[tuple[str, Any]] = []

        def capture(_c: Any, _cur: Any, sql: str, params: Any, *_: Any) -> None:
            seen.append((sql, params))

        event.listen(store.writer.engine, "before_cursor_execute", capture)
        event.listen(store.reader.engine, "before_cursor_execute", capture)
        with store.block_txn("local", START_MS) as txn:
            txn.due(100, 90, 0)
            payments_due(txn, 0, 100, 90, 95, plain_deposits=False)
        store.watch_entries("local", 10)  # every poll: what was registered since
        event.remove(store.writer.engine, "before_cursor_execute", capture)
        event.remove(store.reader.engine, "before_cursor_execute", capture)
        due_txs, due_payments, new_txs = [(q, p) for q, p in seen if "FROM settlements" in q]
        plans["due txs"] = _plan(store, *due_txs)
        plans["due payments"] = _plan(store, *due_payments)
        plans["newly registered"] = _plan(store, *new_txs)
    finally:
        store.close()
    for name, plan in plans.items():
        assert "SCAN settlements" not in plan, (name, plan)
        assert WALK not in plan, (name, plan)
    assert (
        "ix_settlements_watched_block (chain=? AND watching=? AND block_number<?)"
        in (plans["due txs"])
    )
    assert (
        "ix_settlements_transfer_block (chain=? AND watching=? AND transfer_block<?)"
        in (plans["ripe deposits"])
    )
    assert (
        "ix_settlements_confirm (chain=? AND watching=? AND confirm_height<?)"
        in (plans["due payments"])
    )
    assert "ix_settlements_watched_txs (chain=? AND seq>?)" in plans["newly registered"]


def test_the_watched_txs_index_leaves_out_exactly_the_address_watches() -> None:
    """The literal words of ``ix_settlements_watched_txs`` (a partial index is used only by
    a query in the same words) name exactly the kinds the engine treats as address watches."""
    kinds = WATCHED_TXS.split("NOT IN (")[1].rstrip(")").split(", ")
    assert {k.strip("'") for k in kinds} == set(ADDRESS_KINDS)
