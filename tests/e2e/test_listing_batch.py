"""``GET /v1/settlements`` (cursor pages) and ``POST /v1/settlements/batch`` (one store
transaction, a result per item) on a real daemon process against a real anvil."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import unknown_hash
from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon
from tests.support.stripe_server import StripeServer

pytestmark = pytest.mark.anvil


@pytest.fixture(scope="module")
def daemon(module_daemon: Daemon) -> Daemon:
    return module_daemon


def _item(tx_hash: str, **fields: Any) -> dict[str, Any]:
    return {"chain": CHAIN, "tx_hash": tx_hash, **fields}


def _pages(daemon: Daemon, limit: int, **query: str) -> list[list[dict[str, Any]]]:
    pages: list[list[dict[str, Any]]] = []
    cursor: str | None = None
    while True:
        params = {**query, "limit": str(limit), **({"cursor": cursor} if cursor else {})}
        answer = daemon.get("/v1/settlements", params=params)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        pages.append(page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 100, "the cursor does not advance"


def test_a_batch_answers_every_item_in_order_and_stores_the_valid_ones(daemon: Daemon) -> None:
    first, second = unknown_hash(0xB1), unknown_hash(0xB2)
    items = [
        _item(first, confirmations=2),
        _item(first, confirmations=2),  # the same tx again, in the same batch
        _item("0x1234"),  # malformed hash
        {"chain": "nope", "tx_hash": unknown_hash(0xB3)},
        {"kind": "stripe_payment_intent", "ref": "pi_1"},  # no such source here
        _item(second, dependent_state={"order": 7}),
        _item(first),  # the same tx with other terms (the chain's default depth)
    ]
    answer = daemon.post("/v1/settlements/batch", {"items": items})
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["index"] for r in results] == list(range(len(items)))
    assert [r["status"] for r in results] == [201, 200, 422, 422, 422, 201, 409]
    assert results[6]["fields"] == ["confirmations"] and results[6]["settlement"] is None
    assert results[0]["settlement"]["settlement_id"] == results[1]["settlement"]["settlement_id"]
    assert results[0]["settlement"]["required_confirmations"] == 2
    assert results[2]["fields"] == ["tx_hash"] and "tx_hash" in results[2]["error"]
    assert results[3]["error"].startswith("chain: unknown chain 'nope'")
    assert results[4]["fields"] == ["kind"]
    assert results[5]["settlement"]["dependent_state"] == {"order": 7}
    for result in (results[0], results[5]):
        sid = result["settlement"]["settlement_id"]
        assert daemon.settlement(sid)["verdict"] == "AWAITING_FINALITY"
    assert len(daemon.settlements_of(first)) == 1
    # The same batch again: nothing new, the same ids.
    again = daemon.post("/v1/settlements/batch", {"items": [items[0], items[5]]}).json()
    assert [r["status"] for r in again["results"]] == [200, 200]


def test_a_batch_over_the_limit_or_empty_is_refused_naming_items(daemon: Daemon) -> None:
    too_many = [_item(unknown_hash(0xC000 + i)) for i in range(1001)]
    for items in (too_many, []):
        answer = daemon.post("/v1/settlements/batch", {"items": items})
        assert answer.status_code == 422, answer.text
        assert answer.json()["fields"] == ["items"]
    assert daemon.settlements_of(unknown_hash(0xC000)) == []


def test_a_thousand_registrations_in_one_batch(daemon: Daemon) -> None:
    items = [_item(f"0x{'d' * 56}{i:08x}") for i in range(1000)]
    answer = daemon.post("/v1/settlements/batch", {"items": items}, timeout=60)
    assert answer.status_code == 200, answer.text
    assert {r["status"] for r in answer.json()["results"]} == {201}
    hashes = [item["tx_hash"] for item in items]
    stored = {view["tx_hash"] for view in daemon.settlements()}
    assert set(hashes) <= stored


def test_the_listing_pages_through_every_settlement_once(
    module_anvil: Anvil, anvil_tx: str, make_daemon: Callable[..., Daemon]
) -> None:
    daemon = make_daemon(module_anvil.url)  # its own store: these are all its settlements
    ids = {daemon.register(unknown_hash(0xE000 + i))["settlement_id"] for i in range(5)}
    confirmed = daemon.register(anvil_tx, confirmations=1)["settlement_id"]
    daemon.wait_verdict(confirmed, "FINALITY_CONFIRMED")
    pages = _pages(daemon, limit=2)
    seen = [view["settlement_id"] for page in pages for view in page]
    assert len(seen) == len(set(seen)), "a settlement appears on two pages"
    assert set(seen) == ids | {confirmed}
    assert all(len(page) <= 2 for page in pages)
    # A registration made while paging shows up on a later page, once.
    first = daemon.get("/v1/settlements", params={"limit": "2"}).json()
    late = daemon.register(unknown_hash(0xE100))["settlement_id"]
    rest = _pages(daemon, limit=500, cursor=first["next_cursor"])
    later = [v["settlement_id"] for page in rest for v in page]
    assert later.count(late) == 1
    assert not {v["settlement_id"] for v in first["items"]} & set(later)
    final = _pages(daemon, limit=500, verdict="FINALITY_CONFIRMED", chain=CHAIN, kind="evm_tx")
    assert [v["settlement_id"] for v in final[0]] == [confirmed]
    assert _pages(daemon, limit=10, kind="rq_job") == [[]]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "501"}, "limit"),
        ({"limit": "x"}, "limit"),
        ({"cursor": "-1"}, "cursor"),
        ({"cursor": "abc"}, "cursor"),
        ({"verdict": "FINAL"}, "verdict"),
    ],
)
def test_a_bad_listing_query_is_a_422_naming_the_parameter(
    daemon: Daemon, params: dict[str, str], field: str
) -> None:
    answer = daemon.get("/v1/settlements", params=params)
    assert answer.status_code == 422, answer.text
    assert answer.json()["fields"] == [field]


@pytest.fixture(scope="module")
def anvil_tx(module_anvil: Anvil) -> str:
    tx = module_anvil.send(value=3)
    module_anvil.receipt(tx)
    return tx


def test_finality_register_file_reports_each_item(daemon: Daemon, tmp_path: Path) -> None:
    good = [_item(unknown_hash(0xF1)), _item(unknown_hash(0xF2), confirmations=4)]
    path = tmp_path / "batch.json"
    path.write_text(json.dumps([*good, _item("0xnothex")]))
    done = daemon.cli("register", "--file", str(path), "--json")
    assert done.returncode == 64, done.stderr
    results = json.loads(done.stdout)["results"]
    assert [r["status"] for r in results] == [201, 201, 422]
    assert "1 of 3 refused" in done.stderr
    path.write_text(json.dumps(good))
    again = daemon.cli("register", "--file", str(path))
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("already registered") == 2
    missing = daemon.cli("register", "--file", str(tmp_path / "nope.json"))
    assert missing.returncode == 64 and "--file" in missing.stderr


def test_finality_settlements_pages_with_a_cursor(
    module_anvil: Anvil, anvil_tx: str, make_daemon: Callable[..., Daemon]
) -> None:
    daemon = make_daemon(module_anvil.url)
    ids = [daemon.register(unknown_hash(0xA100 + i))["settlement_id"] for i in range(4)]
    confirmed = daemon.register(anvil_tx, confirmations=1)["settlement_id"]
    daemon.wait_verdict(confirmed, "FINALITY_CONFIRMED")
    first = daemon.cli("settlements", "--limit", "3", "--json")
    assert first.returncode == 0, first.stderr
    page = json.loads(first.stdout)
    assert [v["settlement_id"] for v in page["items"]] == ids[:3]
    rest = daemon.cli("settlements", "--cursor", page["next_cursor"], "--json")
    assert [v["settlement_id"] for v in json.loads(rest.stdout)["items"]] == [*ids[3:], confirmed]
    final = daemon.cli("settlements", "--verdict", "FINALITY_CONFIRMED")
    assert final.returncode == 0, final.stderr
    assert final.stdout.splitlines()[0].startswith(f"{confirmed}  FINALITY_CONFIRMED")


def test_a_batch_mixes_transactions_and_payments(
    module_anvil: Anvil, make_daemon: Callable[..., Daemon]
) -> None:
    with StripeServer("sk_test_batch") as stripe:
        source = (
            '\n[[sources]]\nname = "stripe"\nkind = "stripe_payment_intent"\n'
            f'api_key = "sk_test_batch"\napi_base = "{stripe.url}"\ntimeout_s = 600\n'
        )
        daemon = make_daemon(module_anvil.url, extra_config=source)
        items = [
            _item(unknown_hash(0x7A1)),
            {"kind": "stripe_payment_intent", "ref": "pi_batch_1", "dependent_state": {"a": 1}},
            {"kind": "stripe_payment_intent", "ref": "not a ref"},
            {"kind": "stripe_payment_intent", "ref": "pi_batch_1", "dependent_state": {"a": 1}},
            {"kind": "stripe_payment_intent", "ref": "pi_batch_1"},
        ]
        results = daemon.post("/v1/settlements/batch", {"items": items}).json()["results"]
        assert [r["status"] for r in results] == [201, 201, 422, 200, 409]
        assert results[4]["fields"] == ["dependent_state"]
        assert results[2]["fields"] == ["ref"]
        payment = results[1]["settlement"]
        assert (payment["kind"], payment["source"], payment["ref"]) == (
            "stripe_payment_intent",
            "stripe",
            "pi_batch_1",
        )
        listed = daemon.get("/v1/settlements", params={"kind": "stripe_payment_intent"}).json()
        assert [v["settlement_id"] for v in listed["items"]] == [payment["settlement_id"]]
