"""What the verifier remembers between receipts never lets a changed receipt through.

The offline verifier remembers the checks that are pure functions of a receipt's parts (a
history ancestry; a tx's two trie proofs against its block's roots), keyed by the parts'
canonical JSON (:func:`guard.canonical.json_key`): the issuing daemon checks a tx's proofs
when its block arrives and its receipt's self-check, N blocks later, finds them checked. So
after a receipt verified, every change to those parts must still be refused, with the
reason a first check gives; a failure is never remembered. The plain-JSON boundary's fast
path must refuse exactly what the walk refuses, and say where.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from guard.canonical import FrozenJson, json_key
from guard.errors import ReceiptInvalid
from guard.verify import verify_receipt
from guard.verify_chain import check_tx_proofs

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "receipts"


def _vector(name: str) -> dict[str, Any]:
    receipt: dict[str, Any] = json.loads((VECTORS / f"{name}.json").read_text())["receipt"]
    return receipt


def test_json_key_is_equal_exactly_for_equal_json() -> None:
    assert json_key({"a": [1, "x"], "b": None}) == json_key({"b": None, "a": [1, "x"]})
    assert json_key(FrozenJson({"a": "0x01"})) == json_key({"a": "0x01"})
    assert json_key([True]) != json_key([1])
    assert json_key(["0x01"]) != json_key(["0x010"])
    assert json_key(["a", "b"]) != json_key(["ab"])
    for unkeyed in ((1, 2), [1.5], [2**60], {"é": 1}, {1: "a"}, b"\x00"):
        assert json_key(unkeyed) is None  # checked every time, never remembered


@pytest.mark.parametrize("part", ["receipt_proof", "transaction_proof"])
def test_a_changed_tx_proof_is_refused_after_the_receipt_verified(part: str) -> None:
    receipt = _vector("finality_depth")
    verify_receipt(receipt)  # the proofs' check is remembered now
    for i, node in enumerate(receipt["proof"][part]):
        changed = copy.deepcopy(receipt)
        flipped = "0" if node[-1] != "0" else "1"
        changed["proof"][part][i] = node[:-1] + flipped
        with pytest.raises(ReceiptInvalid, match=part.replace("_", " ")):
            verify_receipt(changed)
    moved = copy.deepcopy(receipt)
    moved["proof"]["tx_index"] += 1  # the same nodes under another key
    with pytest.raises(ReceiptInvalid, match="proof"):
        verify_receipt(moved)


def test_a_changed_history_proof_is_refused_after_the_receipt_verified() -> None:
    receipt = _vector("finality_history_storage")
    verify_receipt(receipt)
    nodes = receipt["proof"]["ancestry"]["storage_proof"]
    changed = copy.deepcopy(receipt)
    changed["proof"]["ancestry"]["storage_proof"][-1] = nodes[-1][:-2] + "00"
    with pytest.raises(ReceiptInvalid, match=r"proof\.ancestry\.storage_proof"):
        verify_receipt(changed)


def test_a_failed_proof_check_is_not_remembered() -> None:
    receipt = _vector("finality_depth")
    proof = receipt["proof"]
    header = proof["headers"][0]
    number = int(header["number"], 16)
    bad = {**proof, "receipt_proof": [proof["transaction_proof"][0]]}
    for _ in range(2):
        with pytest.raises(ReceiptInvalid, match="receipt proof"):
            check_tx_proofs(header, number, proof["tx_index"], bad)
    proven = check_tx_proofs(header, number, proof["tx_index"], proof)
    assert proven.status == 1 and proven.tx_hash == receipt["tx_hash"]
    with pytest.raises(ReceiptInvalid, match="receipt proof"):  # after a success, too
        check_tx_proofs(header, number, proof["tx_index"], bad)


def test_a_node_that_is_not_hex_is_named() -> None:
    receipt = _vector("finality_depth")
    receipt["proof"]["transaction_proof"].append("0xABCD")
    with pytest.raises(
        ReceiptInvalid,
        match=r"^transaction proof: node \d+: must be 0x and lower-case hex of whole bytes$",
    ):
        verify_receipt(receipt)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("\ud800", "lone surrogate"),
        (1.5, "not an integer"),
        (2**53, "beyond 2\\*\\*53 - 1"),
        ((1, 2), "not a JSON value"),
        ({"\udfff": 1}, "lone surrogate"),
    ],
)
def test_the_plain_json_boundary_names_the_place_of_what_it_refuses(
    value: object, reason: str
) -> None:
    receipt = _vector("finality_depth")
    receipt["evidence"]["facts"]["extra"] = [{"deep": value}]
    with pytest.raises(ReceiptInvalid, match=rf"evidence\.facts\.extra\[0\]\.deep.*{reason}"):
        verify_receipt(receipt)
