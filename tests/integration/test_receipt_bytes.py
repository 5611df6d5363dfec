"""A stored receipt is answered as its stored bytes, and a waiting read ends when the receipt
is stored.

What a client notices: ``GET /v1/settlements/{id}/receipt`` answers the same bytes the
API wrote before (FastAPI's JSON encoding of the document) whether the row was stored by
this version or an older one, never a revoked receipt, never another caller's; and a read
waiting for a receipt being built gets it when the receipts component stores it, not at the
next tick of a re-read loop.

Real anvil, a ChainWatcher driven by hand, the receipts component run as the daemon runs it
after a poll, SQLite and PostgreSQL. Time is the rig's injected clock; the wait is given
an hour, so only the wake-up can end it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter
from sqlalchemy import insert

from guard.receipts import REVOCATION
from guard.verify import verify_receipt
from tests.integration.receipts_helpers import Receipts, receipts_for
from tests.support.anvil import Anvil
from tests.support.rigs import Rig, make_watcher
from watcher.receipts.waiting import wait_receipt, wait_receipt_async
from watcher.store import SettlementNotFound
from watcher.store import schema as s

pytestmark = pytest.mark.anvil

FASTAPI_JSON = TypeAdapter(dict[str, Any])
"""How the route encoded the document before (a ``dict[str, Any]`` answer: pydantic's
JSON encoder), the bytes clients have been reading."""


def _final(rig: Rig) -> str:
    """A watched tx mined and N deep (N = 2): its settlement id, its receipt not built."""
    rig.watcher.poll()
    sid = rig.register(rig.anvil.send()).settlement_id
    rig.mine_and_poll(2)
    assert rig.settlement(sid).verdict == "FINALITY_CONFIRMED"
    return sid


def _store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/bytes.db"
    return str(request.getfixturevalue("pg_url"))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_receipt_is_answered_as_the_bytes_clients_read_before(
    anvil: Anvil, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    rig = make_watcher(anvil, _store_url(backend, tmp_path, request), confirmations=2)
    try:
        sid = _final(rig)
        receipts = receipts_for(rig)
        receipts.run(rig)
        document = receipts.latest(sid)
        answered = receipts.store.latest_bytes(sid)
        assert answered == FASTAPI_JSON.dump_json(document)  # byte for byte, as before
        verify_receipt(json.loads(answered), trusted_signers=[receipts.signer.address])

        owner = rig.settlement(sid).owner
        found = receipts.store.answer(sid, owner)
        assert (found.chain, found.verdict, found.receipt) == (
            rig.config.name,
            "FINALITY_CONFIRMED",
            answered,
        )
        with pytest.raises(SettlementNotFound):
            receipts.store.answer(sid, owner + "-another")  # another caller's: not revealed
        # The route's read (the store's raw read, awaited): the same answer, the same refusal.
        assert asyncio.run(receipts.store.answer_now(sid, owner)) == found
        with pytest.raises(SettlementNotFound):
            asyncio.run(receipts.store.answer_now(sid, owner + "-another"))

        # A row an older version stored (SQLAlchemy's JSON encoding: ", " and ": ", \\u
        # escapes) is answered in the same bytes; a non-ASCII character goes as UTF-8.
        older = {**document, "note": "réçu\n"}
        with rig.store.writer.begin() as conn:
            conn.execute(insert(s.receipts).values(**_row(older, body=older)))
        assert receipts.store.latest_bytes(sid) == FASTAPI_JSON.dump_json(older)
        assert "réçu".encode() in FASTAPI_JSON.dump_json(older)

        # Revoked: the newest is withdrawn, the one before is answered again; both revoked,
        # none is.
        _revoke_newest(receipts, sid)
        assert receipts.store.latest_bytes(sid) == answered
        _revoke_newest(receipts, sid)
        assert receipts.store.latest_bytes(sid) is None
        assert receipts.store.answer(sid, owner).receipt is None
        assert asyncio.run(receipts.store.answer_now(sid, owner)).receipt is None
    finally:
        rig.store.close()


def _row(document: dict[str, Any], **values: Any) -> dict[str, Any]:
    return {
        "settlement_id": document["settlement_id"],
        "kind": document["kind"],
        "signer": document["signer"],
        "digest": document["digest"],
        "created_at": 1,
        **values,
    }


def _revoke_newest(receipts: Receipts, sid: str) -> None:
    """Store a revocation of the newest current decision receipt of ``sid``."""
    current = [r for r in receipts.store.for_settlement(sid) if r.kind != REVOCATION]
    revoked = {r.revokes for r in receipts.store.for_settlement(sid)}
    newest = [r for r in current if r.id not in revoked][-1]
    revocation = {**_row(newest.body), "kind": REVOCATION, "digest": "sha256:" + "0" * 64}
    del revocation["created_at"]
    receipts.store.add(revocation, 2, revokes=newest.id)


def test_a_waiting_read_gets_the_receipt_when_it_is_stored(anvil: Anvil, tmp_path: Path) -> None:
    rig = make_watcher(anvil, f"sqlite:///{tmp_path}/wait.db", confirmations=2)
    try:
        sid = _final(rig)
        receipts = receipts_for(rig)
        signal = receipts.issuer.signal
        got: list[bytes | None] = []
        # An hour to wait and an hour between re-reads: only the component's wake-up ends it.
        waiter = threading.Thread(
            target=lambda: got.append(wait_receipt(receipts.store, signal, sid, 3600, 3600)),
            daemon=True,
        )
        waiter.start()
        assert signal.wait_for_waiters(1, timeout=30)  # it read no receipt, and sleeps
        assert got == []
        receipts.run(rig)  # the poll's receipts: built and stored, which wakes it
        waiter.join(timeout=30)
        assert not waiter.is_alive(), "the stored receipt did not wake the waiting read"
        assert got == [receipts.store.latest_bytes(sid)]
        assert got[0] is not None and json.loads(got[0])["settlement_id"] == sid
    finally:
        rig.store.close()


def test_a_waiting_task_gets_the_receipt_when_it_is_stored(anvil: Anvil, tmp_path: Path) -> None:
    """The event-loop wait: the task sleeps holding no thread, and is woken by the store of
    its own settlement's receipt."""
    rig = make_watcher(anvil, f"sqlite:///{tmp_path}/wait-async.db", confirmations=2)
    try:
        sid = _final(rig)
        receipts = receipts_for(rig)
        signal = receipts.issuer.signal
        owner = rig.settlement(sid).owner

        async def read() -> bytes | None:  # the route's read: the store's raw read, awaited
            return (await receipts.store.answer_now(sid, owner)).receipt

        got: list[bytes | None] = []
        waiter = threading.Thread(
            target=lambda: got.append(
                asyncio.run(wait_receipt_async(read, signal, sid, 3600, 3600))
            ),
            daemon=True,
        )
        waiter.start()
        assert signal.wait_for_waiters(1, timeout=30)
        assert got == []
        receipts.run(rig)
        waiter.join(timeout=30)
        assert not waiter.is_alive(), "the stored receipt did not wake the waiting task"
        assert got == [receipts.store.latest_bytes(sid)] and got[0] is not None
    finally:
        rig.store.close()


def test_a_waiting_task_reads_the_store_again_only_when_another_instance_may_store(
    anvil: Anvil, tmp_path: Path
) -> None:
    """While this instance builds the chain's receipts, its wake-up is the only news: a task
    waiting through many re-read intervals reads the store once, then once more when woken;
    when another instance may store the receipt (it holds the lease), every interval reads."""
    rig = make_watcher(anvil, f"sqlite:///{tmp_path}/wait-reads.db", confirmations=2)
    try:
        sid = _final(rig)
        receipts = receipts_for(rig)
        signal = receipts.issuer.signal
        owner = rig.settlement(sid).owner
        reads = {True: 0, False: 0}
        asked = {True: 0, False: 0}
        ticked = {True: threading.Event(), False: threading.Event()}

        def waiter(others: bool) -> threading.Thread:
            async def read() -> bytes | None:
                reads[others] += 1
                return (await receipts.store.answer_now(sid, owner)).receipt

            def other_instance() -> bool:  # asked after each re-read interval without news
                asked[others] += 1
                if asked[others] >= 5:
                    ticked[others].set()
                return others

            async def wait() -> bytes | None:
                return await wait_receipt_async(
                    read, signal, sid, 3600, 0.01, others=other_instance
                )

            thread = threading.Thread(target=lambda: asyncio.run(wait()), daemon=True)
            thread.start()
            return thread

        alone, shared = waiter(others=False), waiter(others=True)
        assert ticked[False].wait(30) and ticked[True].wait(30)  # five intervals each, at least
        assert reads[False] == 1  # the first read only
        assert reads[True] >= 5
        receipts.run(rig)  # stored: wakes both
        alone.join(timeout=30)
        shared.join(timeout=30)
        assert not alone.is_alive() and not shared.is_alive()
        assert reads[False] == 2  # woken, it read the receipt
    finally:
        rig.store.close()


def test_without_a_receipts_component_the_store_is_read_once(anvil: Anvil, tmp_path: Path) -> None:
    rig = make_watcher(anvil, f"sqlite:///{tmp_path}/once.db", confirmations=2)
    try:
        sid = _final(rig)
        receipts = receipts_for(rig)
        assert wait_receipt(receipts.store, None, sid, 3600, 3600) is None  # at once
        receipts.run(rig)
        assert wait_receipt(receipts.store, None, sid, 3600, 3600) == (
            receipts.store.latest_bytes(sid)
        )
    finally:
        rig.store.close()
