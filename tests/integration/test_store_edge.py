"""The store's edge: database errors leave it as store errors (never SQLAlchemy's, never with
the URL's password), and the webhook inbox keeps each event once, applied under its fence.

Real SQLite and PostgreSQL (the ``store_url`` fixture); the unreachable database is a real
connection attempt to a closed loopback port.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from watcher.api.recorded_heads import recorded_heads
from watcher.store import StaleFencingToken, Store, StoreError
from watcher.store import lease_store as ls
from watcher.store.errors import StoreConflict, StoreUnavailable

PASSWORD = "s3cret-pw-never-shown"
EVENT = {"id": "evt_1", "type": "payment_intent.succeeded", "data": {"object": {"id": "pi_1"}}}


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    st = Store.open(store_url)
    yield st
    st.close()


def test_an_unreachable_database_is_store_unavailable_and_names_no_password() -> None:
    store = Store(f"postgresql://watcher:{PASSWORD}@127.0.0.1:1/test")
    try:
        with pytest.raises(StoreUnavailable) as caught:
            store.chains()
        assert isinstance(caught.value, StoreError)
        reason = "store unavailable (the database server refuses connections)"
        assert str(caught.value) == reason  # a fixed phrase, never the driver's text
        assert PASSWORD not in str(caught.value)
        # what /healthz reports: the reason, no URL
        assert recorded_heads(store) == ({}, reason)
    finally:
        store.close()


def test_a_read_only_database_is_named_so_at_once_and_logged_once(
    tmp_path: object, caplog: pytest.LogCaptureFixture
) -> None:
    """What /healthz and a refused write say about a SQLite file that cannot be written
    (opened read-only: as root, a chmod would not stop the writes)."""
    Store.open(f"sqlite:///{tmp_path}/finality.db").close()
    store = Store(f"sqlite:///file:{tmp_path}/finality.db?mode=ro&uri=true")
    try:
        assert store.write_problem() is None
        for _ in range(5):
            with pytest.raises(StoreUnavailable) as caught, store.writer.begin() as conn:
                conn.exec_driver_sql("UPDATE alembic_version SET version_num = version_num")
        assert caught.value.cause == "the database is read-only"
        assert store.write_problem() == "the database is read-only"
        assert store.chains() == {}  # reads still work: only writes are refused
        failures = [r for r in caplog.records if "store: writes" in r.getMessage()]
        assert [r.getMessage() for r in failures] == [
            "store: writes fail: the database is read-only"
        ]
    finally:
        store.close()


def test_a_store_that_cannot_be_opened_names_its_url_without_the_password() -> None:
    with pytest.raises(StoreError) as caught:
        Store.open(f"postgresql://watcher:{PASSWORD}@127.0.0.1:1/test")
    message = str(caught.value)
    assert message.startswith("store postgresql://watcher:***@127.0.0.1:1/test: cannot open")
    assert PASSWORD not in message


def test_a_broken_schema_reads_as_store_unavailable(tmp_path: object) -> None:
    store = Store.open(f"sqlite:///{tmp_path}/finality.db")
    try:
        with store.writer.begin() as conn:
            conn.exec_driver_sql("DROP TABLE settlements")
        with pytest.raises(StoreUnavailable, match=r"^store unavailable \(OperationalError\)$"):
            store.settlement("s-1")
    finally:
        store.close()


def test_a_redelivered_webhook_event_is_kept_once(store: Store) -> None:
    inbox = store.inbox()
    assert inbox.add("stripe", "pi_1", "evt_1", EVENT, "A", 1000) is True
    assert inbox.add("stripe", "pi_1", "evt_1", EVENT, "B", 1100) is False
    [row] = inbox.pending("stripe", 10)
    assert (row.ref, row.event_id, row.event, row.received_by, row.received_at) == (
        "pi_1",
        "evt_1",
        EVENT,
        "A",
        1000,
    )
    assert row.applied_at is None


def test_an_inbox_event_is_applied_only_under_the_current_fence(store: Store) -> None:
    inbox = store.inbox()
    inbox.add("stripe", "pi_1", "evt_1", EVENT, "A", 1000)
    [row] = inbox.pending("stripe", 10)
    lease, _ = ls.acquire(store.writer, "stripe", "A", 1000, 500, None)
    assert lease is not None
    taken, _ = ls.acquire(store.writer, "stripe", "B", 2000, 500, None)  # A's lease lapsed
    assert taken is not None and taken.token == lease.token + 1

    with pytest.raises(StaleFencingToken):
        inbox.mark_applied("stripe", row.id, 2100, "A", ("A", lease.token))
    assert [r.id for r in inbox.pending("stripe", 10)] == [row.id]  # still pending
    assert [r["owner"] for r in ls.rejections(store.writer)] == ["A"]  # the refusal, recorded

    inbox.mark_applied("stripe", row.id, 2200, "B", ("B", taken.token))
    assert inbox.pending("stripe", 10) == []


def test_a_uniqueness_violation_is_a_store_conflict(store: Store) -> None:
    with pytest.raises(StoreConflict), store.writer.begin() as conn:
        for _ in range(2):
            conn.exec_driver_sql(
                "INSERT INTO chains (name, chain_id, updated_at) VALUES ('x', 1, 0)"
            )
