"""The store's contract, the same on SQLite and PostgreSQL (the ``store_url`` fixture)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from tests.integration.helpers import random_tx_hash
from tests.support.rigs import START_MS, register_tx
from watcher.config.chains import ChainConfig
from watcher.settlements import Registration, register, settlement_id_for
from watcher.store import SchemaVersionUnknown, SettlementRecord, Store, StoreMismatch
from watcher.store.db import normalise_url
from watcher.store.schema import SCHEMA_REVISION

CHAIN = ChainConfig.model_validate(
    {"name": "local", "chain_id": 31337, "rpc": ["http://127.0.0.1:1"], "confirmations": 3}
)


def assert_no_connection_checked_out(store: Store) -> None:
    for engine in {store._writer, store._reader}:
        assert engine.pool.checkedout() == 0, f"{engine.url}: connection left checked out"  # type: ignore[attr-defined]


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    st = Store.open(store_url)
    yield st
    assert_no_connection_checked_out(st)
    st.close()


def test_migrate_twice_is_a_no_op(store: Store, store_url: str) -> None:
    assert store.revision() == SCHEMA_REVISION == "0022_deposit_ripe_index"
    rec = register_tx(store, CHAIN, random_tx_hash(), now=START_MS)

    store.migrate()
    assert store.revision() == SCHEMA_REVISION
    again = Store.open(store_url)
    try:
        assert again.revision() == SCHEMA_REVISION
        assert again.settlement(rec.settlement_id) == rec
        assert_no_connection_checked_out(again)
    finally:
        again.close()


def test_registering_twice_returns_the_same_settlement(store: Store) -> None:
    tx = random_tx_hash()
    first = register_tx(store, CHAIN, tx, now=START_MS, timeout_s=60)
    assert first.settlement_id == settlement_id_for("local", tx)
    assert first.verdict == "AWAITING_FINALITY"

    second, created = register(store, Registration(CHAIN, tx, timeout_s=120), START_MS + 5_000)
    assert created is False
    assert second.settlement_id == first.settlement_id
    assert second == first  # the stored one, untouched by the second request
    assert store.verdict_counts() == {("local", "AWAITING_FINALITY"): 1}


def test_ensure_chain_refuses_another_chain_id(store: Store) -> None:
    stored = store.ensure_chain("local", 31337, START_MS)
    assert (stored.name, stored.chain_id, stored.head_number) == ("local", 31337, None)
    assert store.ensure_chain("local", 31337, START_MS + 1).chain_id == 31337

    with pytest.raises(StoreMismatch, match="31337"):
        store.ensure_chain("local", 1, START_MS + 2)
    assert store.chain("local").chain_id == 31337  # type: ignore[union-attr]


def _snapshot(store: Store, rec: SettlementRecord) -> object:
    return (
        store.headers("local"),
        store.chain("local"),
        store.settlement(rec.settlement_id),
        store.reorgs(),
        store.events(),
    )


def test_a_failing_block_txn_rolls_back_everything(store: Store) -> None:
    store.ensure_chain("local", 31337, START_MS)
    rec = register_tx(store, CHAIN, random_tx_hash(), now=START_MS)
    with store.block_txn("local", START_MS) as txn:
        txn.put_header(1, "0x" + "11" * 32, "0x" + "00" * 32, 1, 10)
    before = _snapshot(store, rec)

    class Boom(Exception):
        pass

    with pytest.raises(Boom), store.block_txn("local", START_MS + 1_000) as txn:
        txn.put_header(2, "0x" + "22" * 32, "0x" + "11" * 32, 2, 10)
        txn.set_finalized(1)
        txn.set_inclusion(rec, 2, "0x" + "22" * 32, 0, 1, "0x" + "aa" * 20, 7)
        [fresh] = txn.by_ids([rec.settlement_id])
        assert fresh.block_number == 2  # visible inside the transaction
        txn.save_decision(fresh, "FINALITY_CONFIRMED", "sha256:x", {"verdict": "X"}, False, True)
        txn.record_reorg(
            depth=1,
            ancestor_number=0,
            ancestor_hash="0x" + "00" * 32,
            old_head_number=1,
            old_head_hash="0x" + "11" * 32,
            new_head_number=1,
            new_head_hash="0x" + "33" * 32,
            replaced=[],
            touched=[rec.settlement_id],
            finality_violation=False,
        )
        txn.add_event("settlement_confirmed", "info", {"x": 1}, rec.settlement_id)
        raise Boom

    assert _snapshot(store, rec) == before
    assert [n for n, _, _, _ in store.headers("local")] == [1]
    assert store.settlement(rec.settlement_id).verdict == "AWAITING_FINALITY"
    assert store.events() == []


def test_an_unknown_schema_revision_is_refused(store_url: str) -> None:
    Store.open(store_url).close()
    engine = create_engine(normalise_url(store_url))
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    finally:
        engine.dispose()

    with pytest.raises(SchemaVersionUnknown) as caught:
        Store.open(store_url)
    assert caught.value.revision == "9999"

    engine = create_engine(normalise_url(store_url))
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "9999"
    finally:
        engine.dispose()


def test_migrated_schema_matches_the_table_definitions(store_url: str) -> None:
    """Migrations and watcher/store/schema.py must not drift apart."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from watcher.store.schema import metadata

    store = Store.open(store_url)
    try:
        with store._writer.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
        assert diff == [], f"schema drift between migrations and schema.py: {diff}"
    finally:
        store.close()


def test_instances_started_together_on_a_fresh_postgresql_all_open_it(pg_url: str) -> None:
    """Several daemons deployed at once on an empty database: one migrates, the others wait
    for it and find the schema current (without the lock one of them fails creating
    alembic's table)."""
    import threading

    opened: list[Store] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def open_store() -> None:
        start.wait()
        try:
            opened.append(Store.open(pg_url))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    try:
        assert errors == []
        assert [st.revision() for st in opened] == [SCHEMA_REVISION] * 4
    finally:
        for st in opened:
            st.close()
