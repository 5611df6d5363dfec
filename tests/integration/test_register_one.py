"""A single registration (``Listing.register_one``, ``POST /v1/settlements``; its insert the
compiled positional statement of watcher/store/row_insert.py on SQLite) stores each row
exactly as SQLAlchemy's ``insert`` of the same values does, on SQLite and PostgreSQL: every
column's stored value equal, JSON ``null`` where the dependent state is None; the record it
answers is the row as read back (its ``seq`` too) with its chain's recorded head; and a
repeat writes nothing and answers the stored row.

Real parts: a SQLite file and the machine's PostgreSQL (the ``store_url`` fixture).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import insert

from tests.integration.helpers import numbered_settlement, stored_alike
from watcher.store import NewSettlement, Store
from watcher.store import schema as s
from watcher.store.listing_store import listing
from watcher.store.settlements_store import settlement_values

VARIANTS: list[dict[str, Any]] = [
    {},
    {"dependent_state": {"k": 'a "q" \\ é ☃', "list": [1, None, 2.5], "NULL": None}},
    {"commit_url": "http://127.0.0.1:9/c?q=x", "provisional": True},
    {"sender": "0x" + "ab" * 20, "nonce": 2**63 - 1, "raw_tx": "0x" + "cd" * 100},
    {"dependent_state": {}, "owner": 'caller, "two"', "kind": "evm_payment"},
]


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = Store.open(store_url)
    yield opened
    opened.close()


def _inserted_by_sqlalchemy(store: Store, new: NewSettlement) -> None:
    with store.writer.begin() as conn:
        conn.execute(insert(s.settlements), settlement_values(new))


def test_a_row_added_is_the_row_sqlalchemy_inserts(store: Store) -> None:
    per_row = {"seq", "settlement_id", "tx_hash"}
    for k, variant in enumerate(VARIANTS):
        added, reference = (
            numbered_settlement(k, **variant),
            numbered_settlement(100 + k, **variant),
        )
        record, head, created = listing(store).register_one(added)
        assert created and head is None  # no block recorded for the chain yet
        assert record == store.settlement(added.settlement_id)  # as read back, seq and all
        _inserted_by_sqlalchemy(store, reference)
        stored_alike(store, added.settlement_id, reference.settlement_id, per_row)
        read = store.settlement(added.settlement_id)
        assert (read.dependent_state, read.decision, read.provisional, read.nonce) == (
            added.dependent_state,
            added.decision,
            added.provisional,
            added.nonce,
        )


def test_a_repeat_writes_nothing_and_answers_the_stored_row(store: Store) -> None:
    store.ensure_chain("local", 31337, 1_000)
    with store.block_txn("local", 2_000) as txn:
        txn.put_header(7, "0x" + "77" * 32, "0x" + "66" * 32, 0, keep=64)
    register = listing(store).register_one
    first = numbered_settlement(1, timeout_ms=60_000)
    stored, head, created = register(first)
    assert (created, head) == (True, 7)  # the head recorded with the chain's last block
    again = numbered_settlement(1, timeout_ms=120_000, deadline=121_000)  # other terms
    assert register(again) == (stored, 7, False)  # the stored row, untouched
    assert store.settlement(first.settlement_id) == stored
    other_owner = numbered_settlement(2, tx_hash=first.tx_hash, owner="another")
    record, _, created = register(other_owner)  # another caller's registration of the tx
    assert created and record.owner == "another" and record.seq > stored.seq
