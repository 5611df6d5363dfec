"""Every bad request is a 4xx naming its field, the same way on every route (a real daemon):
a malformed hash in a path reads as in a body, 404s carry ``fields``, an integer too long
for the JSON parser is a 422 naming where it stood, integer parameters are plain digits,
and a listing filter naming an unknown kind lists the known ones."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import unknown_hash
from tests.support.daemon import CHAIN, Daemon

pytestmark = pytest.mark.anvil

HUGE = "9" * 5000
"""A 5,000-digit integer literal (Python refuses to make it an int: it stays text)."""


def test_a_malformed_hash_reads_the_same_in_a_path_as_in_a_body(module_daemon: Daemon) -> None:
    by_path = module_daemon.get(f"/v1/chains/{CHAIN}/txs/0x12")
    by_body = module_daemon.post("/v1/settlements", {"chain": CHAIN, "tx_hash": "0x12"})
    assert by_path.status_code == by_body.status_code == 422
    assert by_path.json() == by_body.json(), (by_path.json(), by_body.json())
    assert by_path.json()["fields"] == ["tx_hash"]
    assert "pattern" not in by_path.json()["error"]


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/settlements/fw_nothing_here", "settlement_id"),
        ("/v1/settlements/fw_nothing_here/receipt", "settlement_id"),
        ("/v1/chains/nowhere/txs/" + "0x" + "ab" * 32, "chain"),
        ("/v1/no/such/route", "path"),
    ],
)
def test_404s_name_their_field(module_daemon: Daemon, path: str, field: str) -> None:
    answer = module_daemon.get(path)
    assert answer.status_code == 404, answer.text
    assert answer.json()["fields"] == [field], answer.json()


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        (f'"confirmations": {HUGE}', "confirmations"),
        (f'"dependent_state": {{"order": [1, {{"qty": -{HUGE}}}]}}', "dependent_state.order.1.qty"),
    ],
)
def test_an_integer_too_long_to_parse_is_a_422_naming_its_field(
    module_daemon: Daemon, fields: str, field: str
) -> None:
    text = f'{{"chain": "{CHAIN}", "tx_hash": "{unknown_hash(77)}", {fields}}}'
    answer = module_daemon.http.post(
        "/v1/settlements", content=text, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 422, answer.text[:300]
    error = answer.json()
    assert error["fields"] == [field], error
    assert error["error"].startswith(f"{field}: an integer of more than"), error


def test_a_long_run_of_digits_inside_a_string_is_just_a_string(module_daemon: Daemon) -> None:
    answer = module_daemon.post(
        "/v1/settlements",
        {"chain": CHAIN, "tx_hash": unknown_hash(78), "dependent_state": {"n": "7" * 5000}},
    )
    assert answer.status_code in (200, 201), answer.text[:300]


@pytest.mark.parametrize("value", ["1_0", "+10", " 10", "10 "])
@pytest.mark.parametrize("path", ["/v1/settlements", "/v1/reorgs", "/v1/events"])
def test_integer_parameters_are_plain_digits(module_daemon: Daemon, path: str, value: str) -> None:
    answer = module_daemon.get(path, params={"limit": value})
    assert answer.status_code == 422, answer.text
    assert answer.json()["fields"] == ["limit"], answer.json()
    assert module_daemon.get(path, params={"limit": "10"}).status_code == 200


def test_an_unknown_kind_filter_names_the_known_kinds(module_daemon: Daemon) -> None:
    answer = module_daemon.get("/v1/settlements", params={"kind": "evm_txx"})
    assert answer.status_code == 422, answer.text
    error = answer.json()
    assert error["fields"] == ["kind"]
    assert "evm_tx" in error["error"] and "evm_payment" in error["error"], error
    assert module_daemon.get("/v1/settlements", params={"kind": "evm_tx"}).status_code == 200
