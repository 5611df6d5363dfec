"""Settlements belong to their caller, on SQLite and PostgreSQL: the same tx
registered by two owners is two settlements; every read for a caller filters by owner."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from tests.integration.helpers import migrate, random_tx_hash
from tests.support.rigs import START_MS
from watcher.config.chains import ChainConfig
from watcher.settlements import Registration, new_settlement, register, settlement_id_for
from watcher.store import SettlementNotFound, SettlementRecord, Store
from watcher.store.db import normalise_url
from watcher.store.errors import DeliveryNotFound
from watcher.store.listing_store import listing
from watcher.store.outbox_states import NewDelivery

CHAIN = ChainConfig.model_validate(
    {"name": "local", "chain_id": 31337, "rpc": ["http://127.0.0.1:1"], "confirmations": 3}
)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    st = Store.open(store_url)
    yield st
    st.close()


def test_rows_written_before_0008_belong_to_anonymous(store_url: str) -> None:
    """A database at 0007 with a settlement in it: after 0008 the row is still there, owned
    by "anonymous", and a second owner can register the same tx."""
    migrate(store_url, "upgrade", "0007")
    tx = random_tx_hash()
    engine = create_engine(normalise_url(store_url))
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO settlements (settlement_id, chain, tx_hash,"
                    " required_confirmations, finality_mode, timeout_ms, initiated_at, deadline,"
                    " verdict, watching, reorg_count, digest, decision, probe_count, created_at,"
                    " updated_at) VALUES ('stl_old', 'local', :tx, 3, 'depth', 1000, :t, :t,"
                    " 'AWAITING_FINALITY', true, 0, 'd', '{}', 0, :t, :t)"
                ),
                {"tx": tx, "t": START_MS},
            )
    finally:
        engine.dispose()
    st = Store.open(store_url)
    try:
        old = st.settlement("stl_old")
        assert old.owner == "anonymous"
        assert old.tx_hash == tx
    finally:
        st.close()


def _register(store: Store, tx: str, owner: str, **kw: Any) -> tuple[SettlementRecord, bool]:
    return register(store, Registration(CHAIN, tx, owner=owner, **kw), START_MS)


def test_the_same_tx_of_two_owners_is_two_settlements_each_with_its_own_state(
    store: Store,
) -> None:
    tx = random_tx_hash()
    a, a_new = _register(store, tx, "alice", dependent_state={"o": 1}, commit_url="http://a/")
    b, b_new = _register(store, tx, "bob", dependent_state={"o": 2}, commit_url="http://b/")
    assert a_new and b_new
    assert a.settlement_id != b.settlement_id
    assert (a.owner, a.dependent_state, a.commit_url) == ("alice", {"o": 1}, "http://a/")
    assert (b.owner, b.dependent_state, b.commit_url) == ("bob", {"o": 2}, "http://b/")
    again, created = _register(store, tx, "bob", dependent_state={"o": 3})
    assert created is False
    assert again == b  # its own, untouched
    assert [r.settlement_id for r in store.settlements_of_tx("local", tx)] == [
        a.settlement_id,
        b.settlement_id,
    ]
    assert store.verdict_counts() == {("local", "AWAITING_FINALITY"): 2}


def test_the_anonymous_owner_keeps_the_id_used_before_owners(store: Store) -> None:
    tx = random_tx_hash()
    anon, _ = _register(store, tx, "anonymous")
    assert anon.settlement_id == settlement_id_for("local", tx)
    again, created = _register(store, tx, "anonymous")
    assert (again.settlement_id, created) == (anon.settlement_id, False)
    assert settlement_id_for("local", tx, "alice") != anon.settlement_id


def test_reads_for_an_owner_never_show_another_owners_settlement(store: Store) -> None:
    tx = random_tx_hash()
    a, _ = _register(store, tx, "alice")
    b, _ = _register(store, tx, "bob")
    other, _ = _register(store, random_tx_hash(), "bob")
    assert store.settlement(a.settlement_id, owner="alice") == a
    with pytest.raises(SettlementNotFound):
        store.settlement(a.settlement_id, owner="bob")
    assert store.settlement_by_tx("local", tx, owner="bob") == b
    with pytest.raises(SettlementNotFound):
        store.settlement_by_tx("local", other.tx_hash, owner="alice")
    pages = listing(store)
    assert [r.settlement_id for r in pages.page(owner="bob")] == [
        b.settlement_id,
        other.settlement_id,
    ]
    assert [r.settlement_id for r in pages.page(owner="alice")] == [a.settlement_id]
    assert len(pages.page()) == 3  # no owner: every owner's (the engine's view)


def test_a_batch_registers_one_tx_for_each_owner(store: Store) -> None:
    tx = random_tx_hash()
    news = [new_settlement(Registration(CHAIN, tx, owner=o), START_MS) for o in ("a", "b", "a")]
    out = listing(store).register_batch(news)
    assert [(r.owner, created) for r, created in out] == [("a", True), ("b", True), ("a", False)]
    assert out[0][0] == out[2][0]
    assert out[0][0].settlement_id != out[1][0].settlement_id


def test_events_and_reorgs_for_an_owner_name_only_its_settlements(store: Store) -> None:
    tx = random_tx_hash()
    a, _ = _register(store, tx, "alice")
    b, _ = _register(store, tx, "bob")
    touched = [a.settlement_id, b.settlement_id]
    with store.block_txn("local", START_MS) as txn:
        txn.record_event("settlement_confirmed", "info", {"n": 1}, a.settlement_id)
        txn.record_event("settlement_confirmed", "info", {"n": 2}, b.settlement_id)
        txn.record_event("reorg", "warning", {"depth": 1, "touched": touched})
        txn.record_event("rpc_unhealthy", "warning", {"endpoint": "http://node:1"})
        txn.record_reorg(
            depth=1,
            ancestor_number=1,
            ancestor_hash="0x" + "11" * 32,
            old_head_number=2,
            old_head_hash="0x" + "22" * 32,
            new_head_number=2,
            new_head_hash="0x" + "33" * 32,
            replaced=[],
            touched=touched,
            finality_violation=False,
        )
    seen = store.events(owner="bob")
    assert [(e.kind, e.settlement_id) for e in seen] == [
        ("settlement_confirmed", b.settlement_id),
        ("reorg", None),
        ("rpc_unhealthy", None),
    ]
    assert seen[1].payload == {"depth": 1, "touched": [b.settlement_id]}
    assert store.events(settlement_id=a.settlement_id, owner="bob") == []
    assert [e.kind for e in store.events(settlement_id=a.settlement_id, owner="alice")] == [
        "settlement_confirmed"
    ]
    assert store.events()[2].payload["touched"] == touched  # unfiltered: as stored
    assert store.reorgs(owner="alice")[0].touched == [a.settlement_id]
    assert store.reorgs()[0].touched == touched
    # the stream filters what it read unfiltered (its gap tracking needs every id)
    assert store.visible_to(store.events(), "carol") == [
        replace(e, payload={**e.payload, "touched": []}) if e.kind == "reorg" else e
        for e in store.events()
        if e.settlement_id is None
    ]


def test_deliveries_for_an_owner_are_those_of_its_settlements(store: Store) -> None:
    tx = random_tx_hash()
    a, _ = _register(store, tx, "alice")
    b, _ = _register(store, tx, "bob")
    with store.block_txn("local", START_MS) as txn:
        for rec in (a, b):
            txn.enqueue_delivery(
                NewDelivery(
                    "commit", "commit", "http://r/", f"k-{rec.settlement_id}", rec.settlement_id
                )
            )
        txn.enqueue_delivery(NewDelivery("webhook", "reorg", "http://ops/", "k-alert"))
    outbox = store.outbox()
    assert [d.settlement_id for d in outbox.list(owner="bob")] == [b.settlement_id]
    assert len(outbox.list()) == 3
    ids = {d.settlement_id: d.id for d in outbox.list()}
    assert outbox.get(ids[a.settlement_id], owner="alice").settlement_id == a.settlement_id
    with pytest.raises(DeliveryNotFound):
        outbox.get(ids[a.settlement_id], owner="bob")
    with pytest.raises(DeliveryNotFound):
        outbox.get(ids[None], owner="bob")
