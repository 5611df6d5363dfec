"""The store's listing pages and batch registration (``watcher.store.listing_store``) on
SQLite and on PostgreSQL: one transaction, duplicates answered with the stored row, pages by
``seq`` that neither repeat nor skip."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.helpers import numbered_settlement
from watcher.store import NewSettlement, Store
from watcher.store.listing_store import listing


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = Store.open(store_url)
    yield opened
    opened.close()


def _new(n: int, chain: str = "local", mode: str = "depth") -> NewSettlement:
    return numbered_settlement(n, chain=chain, finality_mode=mode)


def test_a_batch_inserts_the_new_and_answers_the_stored(store: Store) -> None:
    store.register(_new(1))
    batch = [_new(1), _new(2), _new(2), _new(3, chain="stripe", mode="stripe_payment_intent")]
    results = listing(store).register_batch(batch)
    assert [created for _, created in results] == [False, True, False, True]
    assert [rec.settlement_id for rec, _ in results] == [n.settlement_id for n in batch]
    assert len(listing(store).page(limit=10)) == 3


def test_pages_follow_seq_with_filters(store: Store) -> None:
    listing(store).register_batch([_new(n) for n in range(1, 6)])
    listing(store).register_batch([_new(9, chain="rq", mode="rq_job")])
    first = listing(store).page(limit=2)
    rest = listing(store).page(after_seq=first[-1].seq, limit=10)
    ids = [r.settlement_id for r in first + rest]
    assert ids == [_new(n).settlement_id for n in (1, 2, 3, 4, 5, 9)]
    assert [r.chain for r in listing(store).page(kind="rq_job")] == ["rq"]
    assert len(listing(store).page(kind="evm_tx")) == 5
    assert listing(store).page(verdict="FINALITY_CONFIRMED") == []
    assert [r.tx_hash for r in listing(store).page(chain="rq")] == [_new(9).tx_hash]
