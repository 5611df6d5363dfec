"""The outbox's contract, the same on SQLite and PostgreSQL: enqueue, claim, lease, order.

These are the properties exactly-once delivery rests on: a row exists only if the change it
reports committed; a claim is exclusive between threads; a crashed claim comes back after
its lease with the same key; a superseded claim cannot overwrite a newer outcome.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator

import pytest

from tests.support.rigs import START_MS
from watcher.store import Store
from watcher.store.outbox_store import (
    DeliveryNotFound,
    DeliveryNotReplayable,
    NewDelivery,
    Outbox,
)

LEASE = 5_000


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    st = Store.open(store_url)
    yield st
    for engine in {st._writer, st._reader}:
        assert engine.pool.checkedout() == 0, "connection left checked out"  # type: ignore[attr-defined]
    st.close()


def row(
    key: str, settlement: str | None = None, channel: str = "webhook", kind: str = "reorg"
) -> NewDelivery:
    return NewDelivery(
        channel=channel,
        kind=kind,
        url="http://127.0.0.1:9/x",
        idempotency_key=key,
        settlement_id=settlement,
        body={"key": key},
    )


def put(store: Store, *news: NewDelivery, now: int = START_MS) -> list[bool]:
    with store.block_txn("local", now) as txn:
        return [txn.enqueue_delivery(n) for n in news]


def test_enqueue_is_idempotent_and_commits_with_the_transaction(store: Store) -> None:
    assert put(store, row("a"), row("a"), row("b")) == [True, False, True]
    with pytest.raises(RuntimeError), store.block_txn("local", START_MS) as txn:
        txn.enqueue_delivery(row("c"))
        txn.record_event("reorg", "warning", {"depth": 1})
        raise RuntimeError("the block failed: nothing of it may stay")
    outbox = store.outbox()
    assert [d.idempotency_key for d in outbox.list()] == ["a", "b"]
    assert store.events() == []


def test_a_claim_is_leased_and_comes_back_after_a_crash(store: Store) -> None:
    put(store, row("a"))
    outbox = store.outbox()
    [first] = outbox.claim(START_MS, 10, LEASE)
    assert (first.state, first.attempts, first.next_attempt_at) == ("sending", 1, START_MS + LEASE)
    assert outbox.claim(START_MS + LEASE - 1, 10, LEASE) == []  # leased: nobody else takes it

    # The claimer "crashed": after the lease the row is due again, same key, attempt 2.
    [again] = outbox.claim(START_MS + LEASE, 10, LEASE)
    assert (again.id, again.idempotency_key, again.attempts) == (first.id, "a", 2)
    # The first claimer's late answer cannot overwrite the newer claim's outcome...
    assert outbox.mark_delivered(first, START_MS + LEASE + 1, 200) is False
    assert outbox.get(first.id).state == "sending"
    # ...the current one's can.
    assert outbox.mark_delivered(again, START_MS + LEASE + 2, 200) is True
    done = outbox.get(first.id)
    assert (done.state, done.delivered_at, done.last_status) == (
        "delivered",
        START_MS + LEASE + 2,
        200,
    )
    assert outbox.claim(START_MS + 10 * LEASE, 10, LEASE) == []


def test_concurrent_claimers_never_share_a_row(store: Store) -> None:
    outbox = store.outbox()
    outbox.enqueue_many([row(f"k{i}") for i in range(120)], START_MS)
    taken: Counter[int] = Counter()
    lock = threading.Lock()
    errors: list[BaseException] = []

    def claimer() -> None:
        mine = Outbox(store._writer, store._reader)
        try:
            while True:
                got = mine.claim(START_MS, 7, LEASE)
                if not got:
                    return
                with lock:
                    taken.update(r.id for r in got)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=claimer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert len(taken) == 120 and set(taken.values()) == {1}


def test_commit_channel_rows_go_in_order_per_settlement(store: Store) -> None:
    put(
        store,
        row("p1", "s1", "commit", "provisional"),
        row("c1", "s1", "commit", "commit"),
        row("c2", "s2", "commit", "commit"),
        row("alert", "s1", "webhook", "reorg"),
    )
    outbox = store.outbox()
    first = outbox.claim(START_MS, 10, LEASE)
    # s1's commit waits for s1's provisional update; others are independent.
    assert [r.idempotency_key for r in first] == ["p1", "c2", "alert"]
    # Nothing else can be claimed before p1's lease ends (or p1 is done).
    assert outbox.next_due_at(START_MS) == START_MS + LEASE
    p1 = first[0]
    assert outbox.mark_failed(p1, START_MS + 1, 503, "HTTP 503", START_MS + 1_000)
    assert outbox.claim(START_MS + 2, 10, LEASE) == []  # p1 pending again: c1 still waits
    assert outbox.next_due_at(START_MS + 2) == START_MS + 1_000
    [retry] = outbox.claim(START_MS + 1_000, 10, LEASE)
    assert retry.idempotency_key == "p1"
    outbox.mark_delivered(retry, START_MS + 1_001, 200)
    [c1] = outbox.claim(START_MS + 1_002, 10, LEASE)
    assert c1.idempotency_key == "c1"


def test_dead_letter_and_replay(store: Store) -> None:
    put(store, row("a"))
    outbox = store.outbox()
    [claimed] = outbox.claim(START_MS, 1, LEASE)
    with pytest.raises(DeliveryNotReplayable, match="sending"):
        outbox.replay(claimed.id, START_MS)
    assert outbox.mark_failed(claimed, START_MS + 1, None, "ConnectError: refused", None)
    [dead] = outbox.list(state="dead")
    assert (dead.id, dead.last_error, dead.attempts) == (claimed.id, "ConnectError: refused", 1)
    assert outbox.claim(START_MS + 10 * LEASE, 1, LEASE) == []

    replayed = outbox.replay(dead.id, START_MS + 5)
    assert (replayed.state, replayed.attempts, replayed.idempotency_key) == ("pending", 0, "a")
    [again] = outbox.claim(START_MS + 5, 1, LEASE)
    assert again.id == dead.id and again.attempts == 1
    with pytest.raises(DeliveryNotFound):
        outbox.replay(10_000, START_MS)


def test_a_cancelled_commit_is_revived_under_the_same_key(store: Store) -> None:
    commit = NewDelivery("commit", "commit", "http://x/", "fw:s1:commit", "s1", event_id=1)
    put(store, commit)
    with store.block_txn("local", START_MS + 1) as txn:
        assert txn.cancel_deliveries("s1", ["commit"], "finality reversed") == 1
    [cancelled] = store.outbox().list()
    assert (cancelled.state, cancelled.last_error) == ("cancelled", "finality reversed")
    assert store.outbox().claim(START_MS + 2, 10, LEASE) == []

    again = NewDelivery("commit", "commit", "http://x/", "fw:s1:commit", "s1", event_id=2)
    assert put(store, again, now=START_MS + 3) == [True]
    [revived] = store.outbox().list()
    assert (revived.id, revived.state, revived.event_id) == (cancelled.id, "pending", 2)
    # A delivered row is never revived nor duplicated.
    [claimed] = store.outbox().claim(START_MS + 3, 10, LEASE)
    store.outbox().mark_delivered(claimed, START_MS + 4, 200)
    assert put(store, again, now=START_MS + 5) == [False]
    assert [d.state for d in store.outbox().list()] == ["delivered"]


def test_a_row_whose_last_allowed_attempt_never_reported_dies_at_the_next_claim(
    store: Store,
) -> None:
    put(store, row("a"), row("b"))
    outbox = store.outbox()
    first = outbox.claim_within(START_MS, 10, LEASE, max_attempts=2)
    assert [r.attempts for r in first.rows] == [1, 1] and first.buried == []
    # Neither attempt reports (a hung receiver, a dead daemon): the leases run out.
    second = outbox.claim_within(START_MS + LEASE, 10, LEASE, max_attempts=2)
    assert [r.attempts for r in second.rows] == [2, 2]
    # At the cap: the next claim makes them dead instead of a third attempt.
    third = outbox.claim_within(START_MS + 2 * LEASE, 10, LEASE, max_attempts=2)
    assert third.rows == []
    assert sorted(r.idempotency_key for r in third.buried) == ["a", "b"]
    for rec in outbox.list():
        assert (rec.state, rec.attempts) == ("dead", 2)
        assert rec.last_error is not None and "lease ran out" in rec.last_error
    assert outbox.claim_within(START_MS + 10 * LEASE, 10, LEASE, max_attempts=2).rows == []
