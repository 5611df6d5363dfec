"""The hot queries on PostgreSQL with a big settlements table: each is a handful of
statements and none reads the table sequentially. A poll's reads, a settlement's GET by id
and by tx hash, and listing pages (first, deep, per owner, per chain and verdict) are run
through the real code over a schema holding 30,000 settlements (300 watched, the rest
decided long ago, as a long-running daemon accumulates them); every statement they run is
captured at the store's engines and ``EXPLAIN``-ed with its own parameters after the table
was analysed. A sequential scan there is a read whose cost grows with everything ever
stored, which the scale target (a million settlements, GET p99 and a poll's CPU within
1.5x of 10,000) cannot afford.

Real parts: the machine's PostgreSQL (a fresh schema), a real anvil, the chain watcher
driven by hand with a fake clock, the API under uvicorn on loopback.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, text

from tests.integration.helpers import random_tx_hash
from tests.support.anvil import Anvil
from tests.support.bulk_settlements import bulk_fill
from tests.support.rigs import Rig, make_watcher
from watcher.store import Store
from watcher.store.listing_store import listing

STORED, WATCHED = 30_000, 300
BIG = ("settlements",)
"""The tables that grow with every registration (the others are bounded or per-chain)."""


class Captured:
    """Every statement (with its parameters) the store's engines run while counting."""

    def __init__(self, store: Store) -> None:
        self.engines = {store.writer.engine, store.reader.engine}
        self.fast = store.reader.fast_listeners  # the store's raw read (GET of a settlement)
        self.statements: list[tuple[str, Any]] = []

    def _seen(self, _c: Any, _cur: Any, statement: str, parameters: Any, *_: Any) -> None:
        self.statements.append((statement, parameters))

    def _seen_fast(self, statement: str, parameters: Any) -> None:
        self.statements.append((statement, parameters))

    def __enter__(self) -> Captured:
        for engine in self.engines:
            event.listen(engine, "before_cursor_execute", self._seen)
        self.fast.append(self._seen_fast)
        return self

    def __exit__(self, *exc: object) -> None:
        for engine in self.engines:
            event.remove(engine, "before_cursor_execute", self._seen)
        self.fast.remove(self._seen_fast)

    def plans(self, store: Store) -> list[tuple[str, str]]:
        """(statement, its plan) of each captured SELECT/UPDATE/DELETE (an INSERT of
        values has no scan to look at); a SELECT's plan is run (``EXPLAIN ANALYZE``), so it
        tells how many rows its scans read and threw away."""
        out = []
        with store.writer.engine.connect() as conn:
            for statement, params in self.statements:
                verb = statement.lstrip().split(None, 1)[0].upper()
                if verb not in ("SELECT", "UPDATE", "DELETE"):
                    continue
                first = params[0] if isinstance(params, list | tuple) else params
                explain = "EXPLAIN ANALYZE " if verb == "SELECT" else "EXPLAIN "
                rows = conn.exec_driver_sql(explain + statement, first).all()
                out.append((statement, "\n".join(r[0] for r in rows)))
            conn.rollback()
        return out


WASTE = 100
"""Rows a hot statement may read and throw away (an index that does not fit its filter):
with 30,000 stored and 300 watched, anything more grows with the table or the watched set."""


def _waste(plan: str) -> int:
    return sum(int(n) for n in re.findall(r"Rows Removed by (?:Filter|Index Recheck): (\d+)", plan))


def _table_reads(plans: list[tuple[str, str]]) -> list[str]:
    """The statements that scan a big table sequentially, or read more than ``WASTE`` rows
    of it they do not want: their cost grows with everything ever stored."""
    return [
        f"{statement}\n{plan}"
        for statement, plan in plans
        if any(f"Seq Scan on {table}" in plan for table in BIG) or _waste(plan) > WASTE
    ]


@pytest.fixture(scope="module")
def rig(module_pg_url: str) -> Iterator[Rig]:
    with Anvil() as anvil:
        made = make_watcher(anvil, module_pg_url)
        made.watcher.poll()  # the chain row, its head
        bulk_fill(made.store, made.config, STORED, WATCHED)
        made.store.writer.dispose()  # no plan cached from the empty table
        made.store.reader.dispose()
        try:
            yield made
        finally:
            made.store.close()


def test_a_poll_over_30000_settlements_is_a_few_indexed_statements(rig: Rig) -> None:
    rig.watcher.poll()  # loads the 300 watched into memory (a start's work, once)
    rig.register(random_tx_hash())  # a new registration, due for a probe
    rig.anvil.mine(1)
    rig.clock.advance(1)
    with Captured(rig.store) as seen:
        stats = rig.watcher.poll()
    assert stats.probes == 1
    plans = seen.plans(rig.store)
    assert plans, seen.statements
    assert not _table_reads(plans), "\n\n".join(_table_reads(plans))
    assert len(seen.statements) <= 16, [s for s, _ in seen.statements]


def test_get_by_id_and_by_hash_and_pages_read_by_index(rig: Rig) -> None:
    store = rig.store
    decided = listing(store).page(limit=1, verdict="FINALITY_CONFIRMED")[0]
    deep_seq = decided.seq + STORED // 2
    with Captured(store) as seen:
        record, head = asyncio.run(store.settlement_at_head(decided.settlement_id, "anonymous"))
        by_hash = store.settlement_by_tx(rig.config.name, decided.tx_hash, owner="anonymous")
        pages = [
            listing(store).page(limit=100),
            listing(store).page(after_seq=deep_seq, limit=100),
            listing(store).page(after_seq=deep_seq, limit=100, owner="anonymous"),
            listing(store).page(limit=100, chain=rig.config.name, verdict="AWAITING_FINALITY"),
            listing(store).page(limit=100, verdict="AWAITING_FINALITY"),
            listing(store).page(limit=100, kind="evm_tx"),
        ]
    assert record == by_hash and head is not None
    assert [len(p) for p in pages] == [100] * 6
    assert all(r.verdict == "AWAITING_FINALITY" for r in pages[3] + pages[4])
    assert len(seen.statements) == 2 + len(pages)  # one statement each
    plans = seen.plans(store)
    assert not _table_reads(plans), "\n\n".join(_table_reads(plans))


def test_the_big_table_is_analysed_as_big(rig: Rig) -> None:
    """The plans above are about a table the planner knows holds 30,000 rows."""
    with rig.store.reader.engine.connect() as conn:
        estimate = conn.execute(
            text(
                "SELECT reltuples FROM pg_class WHERE relname = 'settlements' AND relkind = 'r'"
                " AND relnamespace = current_schema()::regnamespace"
            )
        ).scalar_one()
    assert estimate >= STORED, estimate


def test_reads_on_the_partial_indexes_use_them(rig: Rig) -> None:
    """The block, replacing block, depth and probe columns are indexed only where set
    (watcher/migrations/versions/0020_partial_indexes.py); the reads on them compare the
    column, so PostgreSQL still walks those indexes, not the table."""
    store, chain = rig.store, rig.config.name
    with Captured(store) as seen:
        store.recorded_blocks(chain, 100, 10)
        store.due_probes(chain, 1_700_000_000_000 + 86_400_001, 10)
        store.finality_anchors(chain, 20, 10)
        with store.block_txn(chain, 1_700_000_000_000) as txn:
            txn.anchored_above(STORED - 20)
    plans = seen.plans(store)
    assert not _table_reads(plans), "\n\n".join(_table_reads(plans))
    settlement_plans = [plan for statement, plan in plans if "FROM settlements" in statement]
    blocks, _replaced, probes, _anchors, above = settlement_plans
    assert "ix_settlements_block" in blocks, blocks
    assert "ix_settlements_probe" in probes, probes
    # Either index of a column (0020's, or 0022's of the same rows with ``watching`` before
    # the column): both hold every row that has it.
    assert any(f"ix_settlements_{w}block" in above for w in ("", "watched_")), above
    assert any(f"ix_settlements_{w}replaced" in above for w in ("", "watched_")), above
