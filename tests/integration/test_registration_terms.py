"""A repeated registration with other terms, and what a waiting settlement's view says as
time passes, over the real API on loopback (the daemon's service in the test process, its
clock the test's, a SQLite store, a real Redis behind the RQ source).

A repeat of ``POST /v1/settlements`` used to answer 200 with the stored terms whatever it
asked (another commit_url, dependent_state, confirmations, timeout): the caller believed
its new terms held. Now the same body answers 200 and another one 409 naming each field
that differs, for a tx, a payment to an address, a source's job and a batch item. And the
view's directive is computed when answering: the time elapsed and left move with the clock,
and past the deadline (before the engine decides) it says the verdict is due.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.jobs import RedisSpace, need_redis
from tests.support.rigs import FakeClock
from tests.support.sources_app import LiveApp, source_config_file

TX = "0x" + "ab" * 32
URL_A, URL_B = "http://127.0.0.1:9/a", "http://127.0.0.1:9/b"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[LiveApp, FakeClock]]:
    need_redis()
    space = RedisSpace()
    clock = FakeClock()
    config = source_config_file(
        tmp_path, [{"name": "jobs", "kind": "rq_job", "redis_url": space.url}]
    )
    try:
        with LiveApp(config, clock=clock) as live:
            live.service.store.ensure_chain("local", 31337, clock())
            yield live, clock
    finally:
        space.cleanup()


def post(app: LiveApp, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    answer = app.http.post("/v1/settlements", json=body)
    return answer.status_code, answer.json()


KINDS: dict[str, dict[str, Any]] = {
    "evm_tx": {"chain": "local", "tx_hash": TX, "confirmations": 2},
    "evm_payment": {
        "kind": "evm_payment",
        "chain": "local",
        "to": "0x" + "12" * 20,
        "asset": "native",
        "amount": "1000",
        "reference": "order-7",
        "confirmations": 2,
    },
    "rq_job": {"kind": "rq_job", "ref": "job-7", "source": "jobs"},
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_repeat_with_other_terms_is_409_naming_each_field(
    app: tuple[LiveApp, FakeClock], kind: str
) -> None:
    live, _ = app
    body = {**KINDS[kind], "commit_url": URL_A, "dependent_state": {"ship": 1}, "timeout_s": 60}
    status, first = post(live, body)
    assert status == 201, first
    status, again = post(live, body)
    assert (status, again["settlement_id"]) == (200, first["settlement_id"])

    status, other = post(live, {**body, "commit_url": URL_B, "dependent_state": {"ship": True}})
    assert status == 409, other
    assert other["fields"] == ["dependent_state", "commit_url"]
    assert other["error"].startswith("dependent_state, commit_url: settlement ")
    assert other["settlement_id"] == first["settlement_id"]
    status, other = post(live, {**body, "timeout_s": 61})
    assert (status, other["fields"]) == (409, ["timeout_s"]), other
    if kind != "rq_job":
        status, other = post(live, {**body, "confirmations": 3})
        assert (status, other["fields"]) == (409, ["confirmations"]), other
    view = live.http.get(f"/v1/settlements/{first['settlement_id']}").json()
    assert (view["commit_url"], view["dependent_state"]) == (URL_A, {"ship": 1})  # unchanged


def test_a_batch_item_repeating_with_other_terms_is_409(app: tuple[LiveApp, FakeClock]) -> None:
    live, _ = app
    body = {**KINDS["evm_tx"], "commit_url": URL_A}
    items = [body, body, {**body, "commit_url": URL_B}]
    answer = live.http.post("/v1/settlements/batch", json={"items": items})
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["status"] for r in results] == [201, 200, 409]
    assert results[2]["fields"] == ["commit_url"]


def test_the_directive_says_the_time_of_the_answer(app: tuple[LiveApp, FakeClock]) -> None:
    live, clock = app
    status, view = post(live, {**KINDS["evm_tx"], "timeout_s": 600})
    assert status == 201
    sid = view["settlement_id"]
    assert view["directive"].endswith("(0 ms elapsed, 600000 ms left).")
    assert view["waiting_for"] == "inclusion in a block"

    clock.advance(6)
    view = live.http.get(f"/v1/settlements/{sid}").json()
    assert view["directive"].endswith("(6000 ms elapsed, 594000 ms left).")
    listed = live.http.get("/v1/settlements").json()["items"][0]
    assert listed["directive"] == view["directive"]

    clock.advance(600)  # past the deadline; nothing has decided the timeout yet
    view = live.http.get(f"/v1/settlements/{sid}").json()
    assert view["verdict"] == "AWAITING_FINALITY"
    assert (
        "606000 ms elapsed; the deadline passed 6000 ms ago): its verdict is due"
        in (view["directive"])
    )
    assert "ms left" not in view["directive"]
