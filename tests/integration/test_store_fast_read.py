"""The store's one raw read (watcher/store/fast_read.py), ``settlement_at_head``: what it
reads is the engine's read (the same record, the same Python values) on SQLite and
PostgreSQL alike; beside a writer in another thread it neither waits nor sees what is not
committed, and sees a commit at once; a missing or another caller's settlement is not
found; a disposed store reads again. Real SQLite files and the local PostgreSQL."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from guard.types import UnixMillis
from watcher.config.chains import ChainConfig
from watcher.settlements import Registration, new_settlement
from watcher.store import SettlementRecord, Store

CHAIN = "local"
NOW = UnixMillis(1_700_000_000_000)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = Store.open(store_url)
    try:
        opened.ensure_chain(CHAIN, 31337, NOW)
        yield opened
    finally:
        opened.close()


def _chain() -> ChainConfig:
    return ChainConfig(name=CHAIN, chain_id=31337, rpc=["http://127.0.0.1:9"])


def _registered(store: Store, tx: str, **extra: object) -> SettlementRecord:
    reg = Registration(chain=_chain(), tx_hash="0x" + tx * 64, **extra)  # type: ignore[arg-type]
    record, created = store.register(new_settlement(reg, NOW))
    assert created
    return record


def _at_head(store: Store, sid: str, owner: str) -> tuple[SettlementRecord, int | None]:
    """The raw read, awaited as the API's event loop awaits it."""
    return asyncio.run(store.settlement_at_head(sid, owner))


def _engine_read(store: Store, sid: str) -> tuple[SettlementRecord, int | None]:
    """The same settlement and head read through the engine."""
    rec = store.settlement(sid)
    chain = store.chain(rec.chain)
    return rec, None if chain is None else chain.head_number


def test_the_plain_read_is_the_engines_read(store: Store) -> None:
    plain = _registered(store, "1")
    held = _registered(store, "2", dependent_state={"order": "ö", "n": [1, 2.5, None, True]})
    with store.block_txn(CHAIN, NOW + 1) as txn:
        txn.set_inclusion(held, 7, "0x" + "7" * 64, 3, 0, None, None)
        txn.put_header(9, "0x" + "9" * 64, "0x" + "8" * 64, 0, keep=64)
        txn.save_decision(
            store.settlement(held.settlement_id), "SETTLEMENT_FAILED", "d", {"x": 1}, False, True
        )
    for record in (plain, held):
        counted = store.reader.fast_statements
        here = _at_head(store, record.settlement_id, "anonymous")
        assert store.reader.fast_statements == counted + 1  # one statement, the raw read
        there = _engine_read(store, record.settlement_id)
        assert here == there
        assert [type(v) for v in vars(here[0]).values()] == [
            type(v) for v in vars(there[0]).values()
        ]
    rec, head = _at_head(store, held.settlement_id, "anonymous")
    assert (head, rec.block_number, rec.watching, rec.verdict) == (9, 7, False, "SETTLEMENT_FAILED")
    assert rec.dependent_state == {"order": "ö", "n": [1, 2.5, None, True]}
    assert _at_head(store, plain.settlement_id, "anonymous")[0].dependent_state is None


def test_the_plain_read_neither_waits_for_a_writer_nor_sees_it_before_its_commit(
    store: Store,
) -> None:
    record = _registered(store, "3")
    sid = record.settlement_id
    _at_head(store, sid, "anonymous")  # the raw read's connection is open
    written, release = threading.Event(), threading.Event()

    def writer() -> None:
        with store.block_txn(CHAIN, NOW + 1) as txn:
            txn.set_inclusion(record, 5, "0x" + "5" * 64, 0, 1, None, None)
            written.set()
            release.wait(10)  # the write transaction stays open (its lock held) meanwhile

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert written.wait(10)
        counted = store.reader.fast_statements
        assert _at_head(store, sid, "anonymous")[0].block_number is None
        assert store.reader.fast_statements == counted + 1
    finally:
        release.set()
        thread.join()
    assert _at_head(store, sid, "anonymous")[0].block_number == 5


def test_a_missing_or_foreign_settlement_is_not_found_and_a_disposed_reader_reopens(
    store: Store,
) -> None:
    from watcher.store import SettlementNotFound

    sid = _registered(store, "4").settlement_id
    with pytest.raises(SettlementNotFound):
        _at_head(store, sid, "someone-else")
    with pytest.raises(SettlementNotFound):
        _at_head(store, "stl_" + "0" * 24, "anonymous")
    counted = store.reader.fast_statements
    store.reader.dispose()  # its connection closed, as the engine's pool is
    assert _at_head(store, sid, "anonymous")[0].settlement_id == sid
    assert store.reader.fast_statements == counted + 1  # opened again
