"""What a node's answer must be before it is used: a batch matched to its calls by id, a tx,
receipt or block that is the one asked for (chains/transport.py, chains/rpc_parse.py)."""

from __future__ import annotations

from typing import Any

import pytest

from chains.rpc_parse import not_what_was_asked
from chains.transport import in_call_order

TX_A = "0x" + "aa" * 32
TX_B = "0x" + "bb" * 32


def test_a_batch_answered_in_any_order_is_put_back_in_call_order() -> None:
    answers = [{"id": 9, "result": "b"}, {"id": 7, "result": "a"}]
    assert in_call_order(answers, 2) == [{"id": 7, "result": "a"}, {"id": 9, "result": "b"}]


@pytest.mark.parametrize(
    ("answers", "why"),
    [
        ([{"result": "b"}, {"result": "a"}], "no (integer) id"),
        ([{"id": 1, "result": "b"}, {"id": None, "result": "a"}], "no (integer) id"),
        ([{"id": "1", "result": "b"}, {"id": 2, "result": "a"}], "no (integer) id"),
        ([{"id": 3, "result": "b"}, {"id": 3, "result": "a"}], "the same id"),
        ([{"id": 1, "result": "a"}], "expected 2"),
        ([{"id": 1, "result": "a"}, "b"], "expected 2"),
    ],
)
def test_a_batch_whose_answers_cannot_be_told_apart_is_refused(
    answers: list[Any], why: str
) -> None:
    refused = in_call_order(answers, 2)
    assert isinstance(refused, str) and why in refused


@pytest.mark.parametrize(
    ("method", "params", "result"),
    [
        ("eth_getTransactionByHash", [TX_A], {"hash": TX_B}),
        ("eth_getTransactionReceipt", [TX_A], {"transactionHash": TX_B}),
        ("eth_getBlockByHash", [TX_A, False], {"hash": TX_B}),
        ("eth_getBlockByNumber", ["0x10", False], {"number": "0x11"}),
    ],
)
def test_an_answer_about_something_else_is_named(
    method: str, params: list[Any], result: dict[str, Any]
) -> None:
    wrong = not_what_was_asked(method, params, result)
    assert wrong is not None and method in wrong


@pytest.mark.parametrize(
    ("method", "params", "result"),
    [
        ("eth_getTransactionByHash", [TX_A], {"hash": TX_A.upper().replace("0X", "0x")}),
        ("eth_getTransactionByHash", [TX_A], None),  # "no such tx" is judged elsewhere
        ("eth_getBlockByNumber", ["latest", False], {"number": "0x11"}),  # a tag: any height
        ("eth_getBlockByNumber", ["0x11", True], {"number": "0x11"}),
        ("eth_chainId", [], "0x1"),
    ],
)
def test_the_answer_asked_for_passes(method: str, params: list[Any], result: Any) -> None:
    assert not_what_was_asked(method, params, result) is None
