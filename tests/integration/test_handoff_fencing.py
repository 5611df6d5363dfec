"""Leases and fencing tokens on the store, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time

import pytest

from watcher.store import StaleFencingToken, Store
from watcher.store import lease_store as ls


@pytest.fixture
def store(store_url: str) -> Store:
    opened = Store.open(store_url)
    opened.ensure_chain("local", 31337, 0)
    return opened


def head_of(store: Store) -> int | None:
    record = store.chain("local")
    return None if record is None else record.head_number


def test_tokens_grow_and_a_stale_write_is_refused_and_recorded(store: Store) -> None:
    try:
        a, taken = ls.acquire(store.writer, "local", "A", 1000, 500, None)
        assert a is not None and taken is not None and taken.reason == "first" and a.token == 1
        with store.block_txn("local", 1000, ("A", 1)) as txn:
            txn.put_header(1, "0x" + "11" * 32, "0x" + "00" * 32, 1, keep=10)
        # B cannot take a live lease; A renews it.
        assert ls.acquire(store.writer, "local", "B", 1200, 500, None) == (None, None)
        renewed, none = ls.acquire(store.writer, "local", "A", 1300, 500, 1)
        assert renewed is not None and none is None and renewed.expires_at == 1800
        # A pauses past its lease: B takes over with a higher token.
        b, taken = ls.acquire(store.writer, "local", "B", 1900, 500, None)
        assert b is not None and taken is not None
        assert (taken.reason, b.token, taken.previous and taken.previous.owner) == (
            "expired",
            2,
            "A",
        )
        with (
            pytest.raises(StaleFencingToken) as refused,
            store.block_txn("local", 1950, ("A", 1)) as txn,
        ):
            txn.put_header(2, "0x" + "22" * 32, "0x" + "11" * 32, 2, keep=10)
        assert (refused.value.current_owner, refused.value.current_token) == ("B", 2)
        assert head_of(store) == 1, "nothing of the refused write was stored"
        [row] = ls.rejections(store.writer)
        assert (row["owner"], row["token"], row["current_owner"], row["current_token"]) == (
            "A",
            1,
            "B",
            2,
        )
        # A's renewal with its old token does not renew anything either.
        assert ls.acquire(store.writer, "local", "A", 1960, 500, 1) == (None, None)
        # B releases (SIGTERM): the next owner gets token 3 at once, reason "released".
        assert ls.release(store.writer, "local", "B", 2, 2000)
        c, taken = ls.acquire(store.writer, "local", "A", 2001, 500, None)
        assert c is not None and taken is not None and (c.token, taken.reason) == (3, "released")
    finally:
        store.close()


def test_a_takeover_waits_for_a_write_in_progress_on_postgresql(pg_url: str) -> None:
    """The write holds a share lock on the lease row: the takeover commits after it, so a
    write is either entirely before the takeover or refused: never interleaved."""
    store = Store.open(pg_url)
    store.ensure_chain("local", 31337, 0)
    try:
        ls.acquire(store.writer, "local", "A", 1000, 100, None)
        took: list[float] = []

        def take_over() -> None:
            ls.acquire(store.writer, "local", "B", 5000, 100, None)
            took.append(time.monotonic())

        with store.block_txn("local", 1000, ("A", 1)) as txn:
            thread = threading.Thread(target=take_over)
            thread.start()
            time.sleep(0.5)
            assert not took, "the takeover must wait for the fenced write"
            txn.put_header(1, "0x" + "11" * 32, "0x" + "00" * 32, 1, keep=10)
            committed = time.monotonic()
        thread.join(5)
        assert took and took[0] >= committed
        assert head_of(store) == 1
        assert [x.owner for x in ls.leases(store.writer)] == ["B"]
    finally:
        store.close()
