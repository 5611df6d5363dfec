"""The SQL that picks the deposits a block may make final asks each deposit's own rule,
exactly as the guard decides it: :func:`watcher.store.conditions.rule_reached` against
:func:`guard.finality_rule.finality_basis`, the oracle, over every rule and a grid of
blocks, depths and tags, on SQLite and PostgreSQL.

Why it matters: the reads once asked "deep enough, or under some tag" of every deposit. A
deposit awaiting the ``finalized`` tag was then decided again, the whole way, at every
block from its third confirmation until the tag reached it (64 blocks on Ethereum): after
17 blocks of 1,000 deposits, 2.6 s of CPU a block.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, insert, select

from guard.finality_rule import FINALITY_MODES, finality_basis
from watcher.store import Store
from watcher.store.conditions import rule_reached

HEAD = 20
BLOCKS = range(1, HEAD + 1)
REQUIRED = (1, 3, 12)
TAGS = (None, 0, 7, 15, HEAD)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    st = Store.open(store_url)
    yield st
    st.close()


def test_the_sql_rule_is_the_guards_rule_for_every_mode_block_and_tag(store: Store) -> None:
    cases = Table(
        "rule_cases",
        MetaData(),
        Column("block", Integer),
        Column("required", Integer),
        Column("mode", String(32)),
        prefixes=["TEMPORARY"],
    )
    grid = list(itertools.product(BLOCKS, REQUIRED, FINALITY_MODES))
    with store.writer.begin() as conn:
        cases.create(conn)
        conn.execute(insert(cases), [{"block": b, "required": r, "mode": m} for b, r, m in grid])
        checked = 0
        for finalized, safe in itertools.product(TAGS, TAGS):
            found = conn.execute(
                select(cases.c.block, cases.c.required, cases.c.mode).where(
                    rule_reached(
                        cases.c.block, cases.c.required, cases.c.mode, HEAD, finalized, safe
                    )
                )
            ).all()
            expected = {
                (b, r, m)
                for b, r, m in grid
                if finality_basis(m, b, HEAD - b + 1, r, finalized, safe) is not None
            }
            assert {tuple(r) for r in found} == expected, (finalized, safe)
            checked += len(expected)
        cases.drop(conn)
    # The grid holds both answers for every rule: reached and not yet.
    assert 0 < checked < len(grid) * len(TAGS) ** 2
