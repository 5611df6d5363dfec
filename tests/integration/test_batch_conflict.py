"""The records a batch answers are the stored rows, on SQLite and PostgreSQL (a
batch's new rows are built from the values inserted and their seq, not read back whole).

And a batch racing another registration of one of its txs: on PostgreSQL another instance
may commit the same (chain, tx hash, owner) between the batch's lookup and its insert. The
insert then conflicts, the whole transaction is retried once, and that item is answered as
already registered with the row the other instance stored; the batch's other items are
created. (On SQLite a writer takes the lock before its lookup: no such race.)

Real parts: stores on a SQLite file and on the machine's PostgreSQL (two daemons'
connections); the race is made deterministic by committing the other registration from a
hook on the batch's INSERT.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event

from tests.integration.helpers import numbered_settlement
from watcher.store import NewSettlement, Store
from watcher.store.listing_store import listing


def _new(n: int, state: dict[str, Any] | None = None) -> NewSettlement:
    return numbered_settlement(n, dependent_state=state)


def test_a_registration_committed_during_a_batch_is_answered_as_stored(pg_url: str) -> None:
    ours, theirs = Store.open(pg_url), Store.open(pg_url)
    inserts: list[str] = []

    def race(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO SETTLEMENTS"):
            inserts.append(statement)
            if len(inserts) == 1:  # after our lookup, before our insert: theirs commits
                theirs.register(_new(2, {"by": "theirs"}))

    event.listen(ours.writer.engine, "before_cursor_execute", race)
    try:
        batch = [_new(1, {"by": "ours"}), _new(2, {"by": "ours"}), _new(3, {"by": "ours"})]
        results = listing(ours).register_batch(batch)
    finally:
        event.remove(ours.writer.engine, "before_cursor_execute", race)
    try:
        assert len(inserts) == 2  # the conflicting insert, then the retry's
        assert [created for _, created in results] == [True, False, True]
        assert [rec.dependent_state for rec, _ in results] == [
            {"by": "ours"},
            {"by": "theirs"},
            {"by": "ours"},
        ]
        for rec, _ in results:
            assert ours.settlement(rec.settlement_id) == rec
    finally:
        ours.close()
        theirs.close()


def test_the_records_a_batch_answers_are_the_stored_ones(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        store.register(_new(1, {"by": "before"}))
        batch = [_new(1), _new(2, {"n": [1, 2]}), _new(2), _new(3)]
        results = listing(store).register_batch(batch)
        assert [created for _, created in results] == [False, True, False, True]
        for rec, _ in results:
            assert store.settlement(rec.settlement_id) == rec  # every field, seq included
    finally:
        store.close()
