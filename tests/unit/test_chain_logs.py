"""Parsing ERC-20 Transfer logs (chains/logs.py) as nodes spell them: what is kept, what is
left out (removed, other events, ERC-721's four topics, a malformed value)."""

from __future__ import annotations

from typing import Any

import pytest

from chains.errors import RpcMalformedResponse
from chains.logs import TRANSFER_TOPIC, padded, parse_transfer_log

TOKEN = "0x" + "11" * 20
FROM = "0x" + "22" * 20
TO = "0x" + "33" * 20


def log(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "address": TOKEN.upper().replace("0X", "0x"),
        "topics": [TRANSFER_TOPIC, padded(FROM), padded(TO)],
        "data": "0x" + f"{1234:064x}",
        "blockNumber": "0x10",
        "blockHash": "0x" + "aa" * 32,
        "transactionHash": "0x" + "bb" * 32,
        "transactionIndex": "0x2",
        "logIndex": "0x5",
        "removed": False,
    }
    raw.update(changes)
    return raw


def test_a_transfer_log_is_parsed_lower_cased() -> None:
    got = parse_transfer_log(log(), "http://node")
    assert got is not None
    assert (got.token, got.sender, got.to, got.value) == (TOKEN, FROM, TO, 1234)
    assert (got.block_number, got.tx_index, got.log_index) == (16, 2, 5)


@pytest.mark.parametrize(
    "changes",
    [
        {"removed": True},
        {"topics": ["0x" + "00" * 32, padded(FROM), padded(TO)]},  # another event
        {"topics": [TRANSFER_TOPIC, padded(FROM), padded(TO), "0x" + "00" * 32]},  # ERC-721
        {"data": "0x"},
        {"data": "0x" + "zz" * 32},
    ],
    ids=["removed", "other-event", "erc721", "no-value", "bad-hex"],
)
def test_what_is_not_a_live_erc20_transfer_is_left_out(changes: dict[str, Any]) -> None:
    assert parse_transfer_log(log(**changes), "http://node") is None


def test_a_malformed_field_names_the_endpoint_and_field() -> None:
    with pytest.raises(RpcMalformedResponse, match="blockHash"):
        parse_transfer_log(log(blockHash="0x12"), "http://node")
