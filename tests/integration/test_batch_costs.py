"""What a batch registration costs the store, and that its answer is what a read shows
(performance under load): the rows a batch inserts are not read back (their
records are built from the values inserted and the ``seq`` each got), only the rows already
stored are; every result still equals ``GET /v1/settlements/{id}`` of it, whatever the
item carried (dependent state, commit URL, sender and nonce, provisional), for new items,
repeats within the batch and items registered before.

Real parts: the daemon's service and API under uvicorn on loopback (tests/support/
sources_app.py), its SQLite store; statements seen at the store's writer engine.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from tests.support.sources_app import LiveApp, chain_app
from watcher.store.json_text import json_text

CHAIN = "local"


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveApp]:
    with chain_app(tmp_path) as app:
        yield app


class Seen:
    """The statements the store's writer runs while counting (a context manager)."""

    def __init__(self, live: LiveApp) -> None:
        self.engine = live.service.store.writer.engine
        self.statements: list[str] = []

    def _seen(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        self.statements.append(" ".join(statement.split()).upper())

    def __enter__(self) -> Seen:
        event.listen(self.engine, "before_cursor_execute", self._seen)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(self.engine, "before_cursor_execute", self._seen)

    def after_insert(self) -> list[str]:
        """The statements after the (first) INSERT into settlements."""
        first = next(i for i, s in enumerate(self.statements) if s.startswith("INSERT"))
        return self.statements[first + 1 :]


def _hash() -> str:
    return "0x" + secrets.token_hex(32)


def _post(live: LiveApp, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    answer = live.http.post("/v1/settlements/batch", json={"items": items}, timeout=60)
    assert answer.status_code == 200, answer.text
    results: list[dict[str, Any]] = answer.json()["results"]
    return results


def test_the_rows_a_batch_inserts_are_not_read_back(live: LiveApp) -> None:
    items = [{"chain": CHAIN, "tx_hash": _hash()} for _ in range(1000)]
    with Seen(live) as seen:
        results = _post(live, items)
    assert [r["status"] for r in results] == [201] * 1000
    later = [s for s in seen.after_insert() if s.startswith("SELECT")]
    # Only the seq of each new row (2 chunks of 500); before, every column of every row.
    assert len(later) <= 2, later
    assert all("DECISION" not in s and "DEPENDENT_STATE" not in s for s in later), later
    for r in results[:3] + results[-3:]:
        read = live.http.get(f"/v1/settlements/{r['settlement']['settlement_id']}").json()
        assert r["settlement"] == read


def test_every_result_of_a_mixed_batch_is_what_a_read_shows(live: LiveApp) -> None:
    before: dict[str, Any] = {"chain": CHAIN, "tx_hash": _hash(), "dependent_state": {"order": 1}}
    [first] = _post(live, [before])
    assert first["status"] == 201
    rich: dict[str, Any] = {
        "chain": CHAIN,
        "tx_hash": _hash(),
        "confirmations": 2,
        "timeout_s": 90.5,
        "dependent_state": {"order": 7, "lines": [{"sku": "a", "qty": 2}], "note": "é"},
        "commit_url": "http://127.0.0.1:9/commit",
        "provisional": True,
    }
    sent: dict[str, Any] = {
        "chain": CHAIN,
        "tx_hash": _hash(),
        "sender": "0x" + "ab" * 20,
        "nonce": 7,
    }
    bare: dict[str, Any] = {"chain": CHAIN, "tx_hash": _hash()}
    items = [rich, before, sent, bare, {**bare, "tx_hash": bare["tx_hash"].upper()}]
    results = _post(live, [*items, {"chain": "nowhere", "tx_hash": _hash()}])

    assert [r["status"] for r in results] == [201, 200, 201, 201, 200, 422]
    assert results[1]["settlement"]["settlement_id"] == first["settlement"]["settlement_id"]
    assert results[4]["settlement"]["settlement_id"] == results[3]["settlement"]["settlement_id"]
    assert results[0]["settlement"]["dependent_state"] == rich["dependent_state"]
    assert results[0]["settlement"]["commit_url"] == rich["commit_url"]
    for r in results[:5]:
        sid = r["settlement"]["settlement_id"]
        assert r["settlement"] == live.http.get(f"/v1/settlements/{sid}").json()
    listed = live.http.get("/v1/settlements", params={"limit": 10}).json()["items"]
    assert [s["settlement_id"] for s in listed] == [
        first["settlement"]["settlement_id"],
        *(results[i]["settlement"]["settlement_id"] for i in (0, 2, 3)),
    ]


def test_a_batch_stores_its_rows_as_a_single_registration_does(live: LiveApp) -> None:
    shape: dict[str, Any] = {
        "chain": CHAIN,
        "confirmations": 2,
        "dependent_state": {"order": 7, "ok": True, "none": None},
        "commit_url": "http://127.0.0.1:9/commit",
        "provisional": True,
        "sender": "0x" + "ab" * 20,
        "nonce": 3,
    }
    alone = live.http.post("/v1/settlements", json={**shape, "tx_hash": _hash()})
    assert alone.status_code == 201, alone.text
    [batched] = _post(live, [{**shape, "tx_hash": _hash()}])
    sids = [alone.json()["settlement_id"], batched["settlement"]["settlement_id"]]

    db = sqlite3.connect(live.service.store.writer.engine.url.database or "")
    try:
        query = "SELECT * FROM settlements WHERE settlement_id = ?"
        names = [d[0] for d in db.execute(query, [sids[0]]).description]
        rows = [dict(zip(names, db.execute(query, [sid]).fetchone(), strict=True)) for sid in sids]
        typeof = "SELECT " + ", ".join(f"typeof({n})" for n in names) + query[8:]
        types = [db.execute(typeof, [sid]).fetchone() for sid in sids]
    finally:
        db.close()
    assert types[0] == types[1]  # the same storage class in every column
    times = {"initiated_at", "created_at", "updated_at", "next_probe_at", "deadline"}
    per_item = {"seq", "settlement_id", "tx_hash", "digest", "decision", *times}
    assert {n: rows[0][n] - rows[0]["initiated_at"] for n in times} == {
        n: rows[1][n] - rows[1]["initiated_at"] for n in times
    }
    same = [n for n in names if n not in per_item]
    assert {n: rows[0][n] for n in same} == {n: rows[1][n] for n in same}
    decisions = [json.loads(r["decision"]) for r in rows]
    assert decisions[0].keys() == decisions[1].keys()
    assert rows[1]["dependent_state"] == json_text(shape["dependent_state"])  # the store's JSON
