"""Alerts are tailed in id order without losing one whose transaction committed late.

On PostgreSQL an event's id is taken at insert, so a later id can be visible before an
earlier one commits. The SSE stream and the log channel must not jump past the earlier one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.support.rigs import START_MS
from watcher.delivery.events_tail import EventTail
from watcher.store import EventRecord, Store


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[Store]:
    st = Store.open(pg_url)
    yield st
    st.close()


class SlowWriter:
    """A block transaction that records an event, then waits before it commits (or fails)."""

    def __init__(self, store: Store, kind: str, fail: bool = False) -> None:
        self.inserted = threading.Event()
        self.finish = threading.Event()
        self._store = store
        self._kind = kind
        self._fail = fail
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self.inserted.wait(10), "the slow writer never inserted its event"

    def _run(self) -> None:
        try:
            with self._store.block_txn("slow", START_MS) as txn:
                txn.record_event(self._kind, "critical", {"n": 1})
                self.inserted.set()
                self.finish.wait(10)
                if self._fail:
                    raise RuntimeError("rolled back")
        except RuntimeError:
            pass

    def done(self) -> None:
        self.finish.set()
        self._thread.join(10)


def record(store: Store, kind: str) -> None:
    with store.block_txn("fast", START_MS) as txn:
        txn.record_event(kind, "info", {"n": 2})


def kinds(events: list[EventRecord]) -> list[str]:
    return [e.kind for e in events]


def test_a_late_commit_is_not_skipped(pg_store: Store) -> None:
    tail: EventTail[EventRecord] = EventTail(0, gap_wait_s=60)
    slow = SlowWriter(pg_store, "finality_violation")
    record(pg_store, "settlement_confirmed")  # a higher id, committed first
    visible = pg_store.events(after_id=tail.last)
    assert kinds(visible) == ["settlement_confirmed"]
    assert tail.take(visible) == [], "handed out past an id still in flight"
    assert tail.holding
    slow.done()
    taken = tail.take(pg_store.events(after_id=tail.last))
    assert kinds(taken) == ["finality_violation", "settlement_confirmed"]
    assert not tail.holding


def test_a_rolled_back_id_holds_the_tail_only_for_the_gap_wait(pg_store: Store) -> None:
    now = [0.0]
    tail: EventTail[EventRecord] = EventTail(0, gap_wait_s=2.0, clock=lambda: now[0])
    slow = SlowWriter(pg_store, "reorg", fail=True)
    record(pg_store, "settlement_confirmed")
    slow.done()  # its id never commits: a permanent gap
    assert tail.take(pg_store.events(after_id=tail.last)) == []
    now[0] = 1.9
    assert tail.take(pg_store.events(after_id=tail.last)) == []
    now[0] = 2.0
    assert kinds(tail.take(pg_store.events(after_id=tail.last))) == ["settlement_confirmed"]
    assert not tail.holding
