"""The L2 tx types no public test data here holds yet: Arbitrum's deposit, unsigned,
contract, retry and submit-retryable txs (0x64-0x69) and its classic-era wrapper (0x78).

Without a real tx to hash, each is checked against the reference struct order transcribed
here independently of guard/tx_types_l2.py (OffchainLabs/go-ethereum @ 49b38a638a91f91f0fdb8be5f740c69f8d6abefc,
core/types/arb_types.go and arbitrum_legacy_tx.go): the bytes built from a JSON object
hold the fields in that order, decode to the object's sender and nonce, hash to keccak256 of
the bytes, and any changed field changes the hash (so encode_checked refuses it). The 0x78
wrapper is built around a real mainnet legacy tx (tests/vectors/real-blocks/eth-18000000).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from chains.proofs import encode_receipt
from guard import rlp
from guard.hashing import keccak256
from guard.tx_encode import TxObjectMismatch, encode_checked, encode_tx
from guard.txs import TransactionError, decode_signed, transaction_hash

SENDER = "0x5b6de44ae9ba4e9af1a5bbbbd2e8a0ee3ed9bd18"
TO = "0x000000000000000000000000000000000000006e"
HASH_A = "0x" + "ab" * 32
HASH_B = "0x" + "cd" * 32
CHAIN = "0xa4b1"
ORDER: dict[int, list[str]] = {
    0x64: ["chainId", "requestId", "from", "to", "value"],
    0x65: ["chainId", "from", "nonce", "maxFeePerGas", "gas", "to", "value", "input"],
    0x66: ["chainId", "requestId", "from", "maxFeePerGas", "gas", "to", "value", "input"],
    0x68: [
        "chainId", "nonce", "from", "maxFeePerGas", "gas", "to", "value", "input",
        "ticketId", "refundTo", "maxRefund", "submissionFeeRefund",
    ],
    0x69: [
        "chainId", "requestId", "from", "l1BaseFee", "depositValue", "maxFeePerGas", "gas",
        "retryTo", "retryValue", "beneficiary", "maxSubmissionFee", "refundTo", "retryData",
    ],
}  # fmt: skip
"""Go struct field order, by JSON name (go-ethereum's RLP encodes a struct's fields in order)."""
VALUES: dict[str, str] = {
    "chainId": CHAIN,
    "requestId": HASH_A,
    "ticketId": HASH_B,
    "from": SENDER,
    "to": TO,
    "retryTo": TO,
    "refundTo": "0x" + "11" * 20,
    "beneficiary": "0x" + "22" * 20,
    "value": "0xde0b6b3a7640000",
    "retryValue": "0x1",
    "depositValue": "0x2386f26fc10000",
    "nonce": "0x7",
    "maxFeePerGas": "0x5f5e100",
    "gas": "0x186a0",
    "l1BaseFee": "0x3b9aca00",
    "maxRefund": "0x5af3107a4000",
    "submissionFeeRefund": "0x1c6bf52634000",
    "maxSubmissionFee": "0x2540be400",
    "input": "0xa9059cbb",
    "retryData": "0x2e567b36",
}
NONCE_OF = {0x65: 7, 0x68: 7}
"""Types whose bytes state the sender's nonce (the others consume none they state)."""


def tx_object(tx_type: int) -> dict[str, Any]:
    obj: dict[str, Any] = {name: VALUES[name] for name in ORDER[tx_type]}
    obj["type"] = hex(tx_type)
    obj["hash"] = "0x" + keccak256(encode_tx(obj).canonical).hex()
    return obj


QUANTITIES = {"chainId", "nonce", "gas", "value", "retryValue", "depositValue", "l1BaseFee"}


def _item(name: str, value: str) -> bytes:
    if name in QUANTITIES or name.startswith("max") or name == "submissionFeeRefund":
        return rlp.encode_uint(int(value, 16))
    return bytes.fromhex(value[2:])


@pytest.mark.parametrize("tx_type", sorted(ORDER), ids=hex)
def test_an_arbitrum_type_holds_the_reference_fields_in_order_and_decodes(tx_type: int) -> None:
    obj = tx_object(tx_type)
    raw = encode_checked(obj).canonical
    assert raw[0] == tx_type
    assert rlp.decode(raw[1:]) == [_item(name, obj[name]) for name in ORDER[tx_type]]
    decoded = decode_signed(raw)
    assert decoded.tx_hash == "0x" + keccak256(raw).hex() == transaction_hash(raw)
    assert (decoded.sender, decoded.nonce) == (SENDER, NONCE_OF.get(tx_type))


@pytest.mark.parametrize("tx_type", sorted(ORDER), ids=hex)
def test_every_changed_field_of_an_arbitrum_type_is_refused(tx_type: int) -> None:
    for name in ORDER[tx_type]:
        obj = tx_object(tx_type)
        obj[name] = obj[name][:-1] + ("1" if obj[name][-1] != "1" else "2")
        with pytest.raises(TxObjectMismatch):
            encode_checked(obj)
        del obj[name]
        if name not in ("to", "retryTo") or tx_type == 0x64:  # nil "to": a creation
            with pytest.raises(TransactionError, match="data" if name == "input" else name):
                encode_tx(obj)


def test_a_submit_retryable_without_retry_to_is_a_creation() -> None:
    obj = {**tx_object(0x69), "retryTo": None}
    raw = encode_tx(obj).canonical
    assert rlp.decode(raw[1:])[7] == b""


def test_the_bytes_of_an_unsigned_type_must_have_its_shape() -> None:
    raw = encode_tx(tx_object(0x65)).canonical
    fields = rlp.decode(raw[1:])
    assert isinstance(fields, list)
    short = bytes([0x65]) + rlp.encode(fields[:-1])
    with pytest.raises(TransactionError, match="has 8 fields, got 7"):
        decode_signed(short)
    bad_from = bytes([0x65]) + rlp.encode([fields[0], b"\x01" * 19, *fields[2:]])
    with pytest.raises(TransactionError, match="from is 19 bytes"):
        decode_signed(bad_from)


LEGACY: dict[str, Any] = next(
    tx
    for tx in json.loads(
        (Path(__file__).resolve().parents[1] / "vectors/real-blocks/eth-18000000.json").read_text()
    )["block"]["transactions"]
    if tx["type"] == "0x0"
)


def test_an_arbitrum_classic_tx_is_its_legacy_tx_with_its_hash_as_a_field() -> None:
    obj = {**LEGACY, "type": "0x78", "effectiveGasPrice": "0x3b9aca00", "l1BlockNumber": "0x10"}
    raw = encode_checked(obj).canonical
    fields = rlp.decode(raw[1:])
    assert isinstance(fields, list) and len(fields) == 4  # signed: no sender field
    assert rlp.encode(fields[0]) == encode_tx(LEGACY).canonical
    decoded = decode_signed(raw)
    assert decoded.tx_hash == LEGACY["hash"] != "0x" + keccak256(raw).hex()
    assert (decoded.sender, decoded.nonce) == (LEGACY["from"], int(LEGACY["nonce"], 16))
    changed = {**obj, "hash": HASH_A}  # the hash is a field: the root check guards it
    assert transaction_hash(encode_checked(changed).canonical) == HASH_A


def test_an_unsigned_arbitrum_classic_tx_names_its_sender() -> None:
    obj = {**LEGACY, "type": "0x78", "v": "0x0", "r": "0x0", "s": "0x0"}
    obj |= {"effectiveGasPrice": "0x0", "l1BlockNumber": "0x10", "from": SENDER}
    raw = encode_checked(obj).canonical
    assert len(rlp.decode(raw[1:])) == 5
    assert decode_signed(raw).sender == SENDER


def test_an_arbitrum_classic_receipt_is_untyped() -> None:
    receipt = {
        "type": "0x78",
        "status": "0x1",
        "cumulativeGasUsed": "0x5208",
        "logsBloom": "0x" + "00" * 256,
        "logs": [],
    }
    assert encode_receipt(receipt) == encode_receipt({**receipt, "type": "0x0"})
    assert encode_receipt(receipt)[0] >= 0xC0
    internal = encode_receipt({**receipt, "type": "0x6a"})
    assert internal == b"\x6a" + encode_receipt({**receipt, "type": "0x0"})


def test_a_replacement_proof_cannot_rest_on_a_tx_that_states_no_nonce() -> None:
    """A deposit or an Arbitrum system tx consumes no nonce it states: decoding says None,
    never a number another tx could share."""
    obj = copy.deepcopy(tx_object(0x64))
    assert decode_signed(encode_checked(obj).canonical).nonce is None
