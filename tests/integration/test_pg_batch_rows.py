"""A batch registration on PostgreSQL (watcher/store/pg_batch.py: one INSERT of column
arrays written as array literals) stores each row exactly as a single registration
(SQLAlchemy's insert) does: every column's stored text equal, JSON ``null`` where the
dependent state is None, and text that an array literal must escape (quotes, backslashes,
commas, braces, the word NULL, newlines, non-ASCII) read back unchanged.

Real parts: the machine's PostgreSQL, a fresh schema per test (tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.helpers import numbered_settlement, stored_alike, stored_text
from watcher.store import NewSettlement, Store
from watcher.store.listing_store import listing
from watcher.store.pg_batch import array_literal

AWKWARD = 'a "quoted" \\ back\\slash, {brace} NULL\nnew line é ☃'


@pytest.fixture
def store(pg_url: str) -> Iterator[Store]:
    opened = Store.open(pg_url)
    yield opened
    opened.close()


def _new(n: int, **changes: Any) -> NewSettlement:
    """:func:`numbered_settlement` with awkward text in its decision."""
    return numbered_settlement(
        n, decision={"verdict": "AWAITING_FINALITY", "note": AWKWARD}, **changes
    )


VARIANTS: list[dict[str, Any]] = [
    {},
    {"dependent_state": {"k": AWKWARD, "list": [1, None, 2.5], "NULL": None, "big": 2**70}},
    {"commit_url": 'http://127.0.0.1:9/c?q="x"\\y', "provisional": True},
    {"sender": "0x" + "ab" * 20, "nonce": 2**63 - 1, "raw_tx": "0x" + "cd" * 100},
    {"dependent_state": {}, "owner": 'caller, "two"', "kind": "evm_payment"},
]


def test_a_batch_row_is_stored_as_a_single_registration_stores_it(store: Store) -> None:
    alone = [_new(k, **v) for k, v in enumerate(VARIANTS)]
    batched = [_new(100 + k, **v) for k, v in enumerate(VARIANTS)]
    for new in alone:
        store.register(new)
    results = listing(store).register_batch(batched)
    assert [created for _, created in results] == [True] * len(VARIANTS)
    per_item = {"seq", "settlement_id", "tx_hash"}
    for one, many, (record, _) in zip(alone, batched, results, strict=True):
        b = stored_alike(store, one.settlement_id, many.settlement_id, per_item)
        assert int(b["seq"]) == record.seq  # the seq the batch answers is the stored one
        read = store.settlement(many.settlement_id)
        assert (read.dependent_state, read.decision, read.commit_url, read.owner) == (
            many.dependent_state,
            many.decision,
            many.commit_url,
            many.owner,
        )
    assert stored_text(store, batched[0].settlement_id)["dependent_state"] == "null"


def test_a_batch_answers_stored_rows_and_repeats_and_inserts_the_rest(store: Store) -> None:
    store.register(_new(1))
    batch = [_new(1), _new(2), _new(2), _new(3, owner="other")]
    results = listing(store).register_batch(batch)
    assert [created for _, created in results] == [False, True, False, True]
    assert results[1][0].seq == results[2][0].seq
    assert results[0][0].seq == store.settlement(_new(1).settlement_id).seq
    assert len(listing(store).page(limit=10)) == 3


def test_an_array_literal_quotes_every_text_and_refuses_what_it_cannot_write() -> None:
    assert array_literal(["a", None, 'q"\\']) == '{"a",NULL,"q\\"\\\\"}'
    assert array_literal([1, None, -2]) == "{1,NULL,-2}"
    assert array_literal([True, False, None]) == "{t,f,NULL}"
    assert array_literal([None, {"a": "b"}], is_json=True) == '{"null","{\\"a\\":\\"b\\"}"}'
    with pytest.raises(TypeError, match="float"):
        array_literal([1.5])
