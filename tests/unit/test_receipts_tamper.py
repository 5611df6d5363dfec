"""Tamper tests: change any single value of a valid receipt and it no longer verifies, for
the right reason. Hypothesis chooses the receipt, the value and the byte.

The receipts are the golden vectors (real anvil blocks, signed). A hex value is changed by
one hex digit (so it stays well formed and only the meaning changes), an integer by a
non-zero amount, any other string by one character.
"""

from __future__ import annotations

import copy
import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from guard.errors import ReceiptInvalid
from guard.headers import OPTIONAL_FIELDS, QUANTITY, REQUIRED_FIELDS
from guard.verify import verify_receipt

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "receipts"
BASES = (
    "finality_depth",
    "finality_finalized",
    "failure_reverted",
    "failure_replaced",
    "timeout_head_proven",
    "binding",
    "revocation",
)
HEX = "0123456789abcdef"
DATA_FIELDS = {name for name, kind in REQUIRED_FIELDS + OPTIONAL_FIELDS if kind != QUANTITY}
DATA_FIELDS.add("hash")

Path_ = tuple[str | int, ...]


def load(name: str) -> tuple[dict[str, Any], list[str]]:
    vector = json.loads((VECTORS / f"{name}.json").read_text())
    return vector["receipt"], vector["trusted_signers"]


def leaves(value: Any, path: Path_ = ()) -> list[tuple[Path_, Any]]:
    """Every string and integer in ``value`` with its path."""
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in leaves(v, (*path, k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in leaves(v, (*path, i))]
    if isinstance(value, str | int) and not isinstance(value, bool):
        return [(path, value)]
    return []


def replaced(receipt: dict[str, Any], path: Path_, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(receipt)
    parent: Any = out
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return out


def mutations(value: str | int) -> st.SearchStrategy[Any]:
    if isinstance(value, int):
        return st.integers(-(2**20), 2**20).filter(bool).map(lambda d: max(0, value + d))
    if value.startswith("0x") and len(value) > 2 and all(c in HEX for c in value[2:]):
        return st.tuples(st.integers(2, len(value) - 1), st.sampled_from(HEX)).map(
            lambda p: value[: p[0]] + p[1] + value[p[0] + 1 :]
        )
    if not value:
        return st.just("x")
    return st.tuples(
        st.integers(0, len(value) - 1), st.sampled_from(string.ascii_letters + string.digits)
    ).map(lambda p: value[: p[0]] + p[1] + value[p[0] + 1 :])


def expected_prefixes(path: Path_) -> tuple[str, ...]:
    """Where a change at ``path`` must be caught."""
    head = path[0]
    if head == "signature":
        return ("signature:",)
    if head == "digest":
        return ("digest:",)
    if head == "proof" and len(path) > 1:
        part = path[1]
        if part in ("headers", "head_at_deadline", "next_header"):
            return ("header ", "proof.")
        if part == "receipt_proof":
            return ("receipt proof:",)
        if part == "transaction_proof":
            return ("transaction proof:",)
        if part == "tx_index":
            return ("receipt proof:", "transaction proof:", "proof.tx_index")
    # Any other field is checked by its own rule, a cross-check, or the digest.
    # (a changed tx_hash also breaks a replacement's link: "failure.watched_raw_tx: …")
    generic = ("digest:", "transaction proof:", "receipt proof:", "evidence", "verdict", "failure")
    return (str(head), *generic)


def check(receipt: dict[str, Any], trusted: list[str], path: Path_, new: Any) -> None:
    tampered = replaced(receipt, path, new)
    with pytest.raises(ReceiptInvalid) as caught:
        verify_receipt(tampered, trusted_signers=trusted)
    reason = caught.value.reason
    assert reason.startswith(expected_prefixes(path)), (path, new, reason)
    assert "\n" not in reason


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_any_single_value_changed_fails(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(BASES), label="vector")
    receipt, trusted = load(name)
    path, value = data.draw(st.sampled_from(leaves(receipt)), label="field")
    new = data.draw(mutations(value), label="new value")
    assume(new != value)
    check(receipt, trusted, path, new)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_header_byte_changed_fails_naming_the_header(data: st.DataObject) -> None:
    receipt, trusted = load("finality_depth")
    headers = receipt["proof"]["headers"]
    index = data.draw(st.integers(0, len(headers) - 1), label="header")
    fields = sorted(k for k in headers[index] if k in DATA_FIELDS and len(headers[index][k]) > 2)
    name = data.draw(st.sampled_from(fields), label="field")
    value: str = headers[index][name]
    byte = data.draw(st.integers(0, (len(value) - 2) // 2 - 1), label="byte")
    flip = data.draw(st.integers(1, 255), label="xor")
    raw = bytearray.fromhex(value[2:])
    raw[byte] ^= flip
    path: Path_ = ("proof", "headers", index, name)
    tampered = replaced(receipt, path, "0x" + raw.hex())
    with pytest.raises(ReceiptInvalid) as caught:
        verify_receipt(tampered, trusted_signers=trusted)
    number = int(headers[index]["number"], 16)
    below = number + 1 if name == "hash" else number
    assert caught.value.reason.startswith((f"header {number}:", f"header {below}:"))


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_proof_node_byte_changed_fails_in_that_proof(data: st.DataObject) -> None:
    receipt, trusted = load(data.draw(st.sampled_from(["finality_depth", "failure_replaced"])))
    which = data.draw(st.sampled_from(["receipt_proof", "transaction_proof"]), label="proof")
    nodes = receipt["proof"][which]
    index = data.draw(st.integers(0, len(nodes) - 1), label="node")
    raw = bytearray.fromhex(nodes[index][2:])
    byte = data.draw(st.integers(0, len(raw) - 1), label="byte")
    raw[byte] ^= data.draw(st.integers(1, 255), label="xor")
    tampered = replaced(receipt, ("proof", which, index), "0x" + raw.hex())
    with pytest.raises(ReceiptInvalid) as caught:
        verify_receipt(tampered, trusted_signers=trusted)
    label = "receipt proof" if which == "receipt_proof" else "transaction proof"
    assert caught.value.reason.startswith(f"{label}: node {index} ")


@settings(max_examples=200, deadline=None)
@given(byte=st.integers(0, 64), flip=st.integers(1, 255))
def test_any_signature_byte_changed_fails(byte: int, flip: int) -> None:
    receipt, trusted = load("finality_depth")
    raw = bytearray.fromhex(receipt["signature"][2:])
    raw[byte] ^= flip
    tampered = replaced(receipt, ("signature",), "0x" + raw.hex())
    with pytest.raises(ReceiptInvalid) as caught:
        verify_receipt(tampered, trusted_signers=trusted)
    assert caught.value.reason.startswith("signature:")


@pytest.mark.parametrize("name", BASES)
def test_dropping_or_adding_a_field_fails(name: str) -> None:
    receipt, trusted = load(name)
    for key in receipt:
        with pytest.raises(ReceiptInvalid):
            verify_receipt({k: v for k, v in receipt.items() if k != key}, trusted_signers=trusted)
    with pytest.raises(ReceiptInvalid) as caught:
        verify_receipt({**receipt, "note": "trust me"}, trusted_signers=trusted)
    assert caught.value.reason.startswith(("note:", "digest:"))
