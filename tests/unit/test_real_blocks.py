"""Real blocks of public chains (tests/vectors/real-blocks/, provenance in its README):
Ethereum mainnet, Arbitrum Sepolia (Nitro), OP Sepolia and another OP Stack chain, and the
first Prague block of the official execution-apis test chain (a type-4 tx).

For each block: the header re-hashes to its hash; its ``transactionsRoot`` is rebuilt from
the node's tx objects (guard/tx_encode.py) or raw bytes, every tx decoding to its real hash
and sender (guard/txs.py); its ``receiptsRoot`` is rebuilt from the node's receipts in the
chain's own receipt form (chains/receipt_encode.py); and a proof of the first tx of every
type in it verifies offline (guard/verify_chain.py) with the status its receipt states.
Before the L2 types were known, the Arbitrum internal tx (0x6a) and the OP deposit (0x7e)
were refused everywhere ("unknown transaction type") and no OP Stack receiptsRoot rebuilt.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from chains.proofs import Trie, encode_receipt
from guard import rlp
from guard.errors import ReceiptInvalid
from guard.hashing import keccak256
from guard.headers import header_hash, header_json
from guard.tx_encode import encode_checked
from guard.txs import decode_signed, transaction_hash
from guard.verify_chain import receipt_status, verify_inclusion

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "real-blocks"
WITH_OBJECTS = ("arbsep-185232421", "eth-18000000", "op-stack-274")
"""Blocks with their full tx objects and receipts as JSON."""
WITH_RAW = ("opsep-26207960", "opsep-26207961", "eth-20000000-raw")
"""Blocks whose txs (and receipts, where there are any) are the node's raw bytes."""
WITH_RECEIPTS = ("arbsep-185232421", "eth-18000000", "op-stack-274", "eth-20000000-raw")


@cache
def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((VECTORS / f"{name}.json").read_text())
    return loaded


def _hex(value: str) -> bytes:
    return bytes.fromhex(value[2:])


def tx_leaves(name: str) -> list[bytes]:
    """The block's txs as its transactions trie holds them."""
    vector = load(name)
    if vector["raw_txs"]:
        return [_hex(raw) for raw in vector["raw_txs"]]
    return [encode_checked(tx).committed for tx in vector["block"]["transactions"]]


def receipt_leaves(name: str) -> list[bytes]:
    """The block's receipts as its receipts trie holds them."""
    vector = load(name)
    if vector.get("raw_receipts"):
        return [_hex(raw) for raw in vector["raw_receipts"]]
    return [encode_receipt(r) for r in vector["receipts"]]


@pytest.mark.parametrize("name", (*WITH_OBJECTS, *WITH_RAW, "hive-prague-45"))
def test_the_header_recomputes_to_its_hash(name: str) -> None:
    block = load(name)["block"]
    expected = load(name)["header_hash_expected"] or block["hash"]  # the source's, if it names one
    assert header_hash(header_json(block)) == block["hash"] == expected


@pytest.mark.parametrize("name", WITH_OBJECTS)
def test_tx_objects_rebuild_the_transactions_root_with_each_tx_hash_and_sender(
    name: str,
) -> None:
    block = load(name)["block"]
    leaves = tx_leaves(name)
    assert "0x" + Trie(leaves).root.hex() == block["transactionsRoot"]
    for tx, leaf in zip(block["transactions"], leaves, strict=True):
        decoded = decode_signed(leaf)
        assert decoded.tx_hash == transaction_hash(leaf) == tx["hash"]
        assert decoded.sender == tx["from"].lower()
        assert decoded.tx_type == int(tx["type"], 16)


@pytest.mark.parametrize("name", WITH_RAW)
def test_raw_txs_rebuild_the_transactions_root_and_each_decodes(name: str) -> None:
    leaves = tx_leaves(name)
    assert "0x" + Trie(leaves).root.hex() == load(name)["block"]["transactionsRoot"]
    decoded = [decode_signed(leaf) for leaf in leaves]
    assert all(
        d.tx_hash == "0x" + keccak256(leaf).hex() for d, leaf in zip(decoded, leaves, strict=True)
    )
    if name.startswith("opsep"):  # every OP Stack block starts with the L1-info deposit
        first = decoded[0]
        assert (first.tx_type, first.sender, first.nonce) == (
            0x7E,
            "0xdeaddeaddeaddeaddeaddeaddeaddeaddead0001",
            None,
        )


@pytest.mark.parametrize("name", WITH_RECEIPTS)
def test_receipts_rebuild_the_receipts_root(name: str) -> None:
    assert "0x" + Trie(receipt_leaves(name)).root.hex() == load(name)["block"]["receiptsRoot"]


def _first_of_each_type(leaves: list[bytes]) -> dict[int, int]:
    first: dict[int, int] = {}
    for index, leaf in enumerate(leaves):
        first.setdefault(decode_signed(leaf).tx_type, index)
    return first


@pytest.mark.parametrize("name", WITH_RECEIPTS)
def test_a_proof_of_every_tx_type_in_the_block_verifies_offline(name: str) -> None:
    block = load(name)["block"]
    txs, receipts = Trie(tx_leaves(name)), Trie(receipt_leaves(name))
    first = _first_of_each_type(tx_leaves(name))
    for tx_type, index in first.items():
        proof = {
            "tx_index": index,
            "headers": [header_json(block)],
            "receipt_proof": ["0x" + n.hex() for n in receipts.proof(index)],
            "transaction_proof": ["0x" + n.hex() for n in txs.proof(index)],
        }
        inclusion = verify_inclusion(proof)
        assert inclusion.tx_hash == transaction_hash(tx_leaves(name)[index]), tx_type
        assert (inclusion.block_hash, inclusion.form) == (block["hash"], "canonical")
        assert inclusion.status == receipt_status(receipt_leaves(name)[index])
    expected = {
        "arbsep-185232421": {0x6A, 2},
        "eth-18000000": {0, 2},
        "op-stack-274": {0x7E},
        "eth-20000000-raw": {0, 1, 2, 3},
    }[name]
    assert set(first) == expected


def test_an_op_deposit_receipt_since_canyon_holds_its_nonce_and_version() -> None:
    """The L1-info deposit's receipt: only the 6-field form rebuilds the header's root, and
    the verifier reads its status; the pre-Canyon form is 4 fields, as the node says."""
    receipt = load("op-stack-274")["receipts"][0]
    root = load("op-stack-274")["block"]["receiptsRoot"]
    canyon = encode_receipt(receipt)
    assert len(rlp.decode(canyon[1:])) == 6
    assert "0x" + Trie([canyon]).root.hex() == root
    before = {k: v for k, v in receipt.items() if k != "depositReceiptVersion"}
    regolith = encode_receipt(before)  # a depositNonce alone is not hashed (Regolith)
    assert len(rlp.decode(regolith[1:])) == 4
    assert "0x" + Trie([regolith]).root.hex() != root
    assert receipt_status(canyon) == receipt_status(regolith) == 1


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ((0x02, 6), "not \\[status, gas, bloom, logs\\]$"),  # extra fields on a non-deposit
        ((0x7E, 5), "nor a deposit receipt"),  # a nonce without its version
        ((0x7E, 7), "nor a deposit receipt"),
    ],
)
def test_the_verifier_takes_extra_receipt_fields_only_from_a_deposit(
    fields: tuple[int, int], why: str
) -> None:
    tx_type, count = fields
    items: list[rlp.Item] = [b"\x01", b"\x52\x08", b"\x00" * 256, [], b"\x07", b"\x01", b"\x01"]
    with pytest.raises(ReceiptInvalid, match=why):
        receipt_status(bytes([tx_type]) + rlp.encode(items[:count]))


def test_a_deposit_receipt_of_version_zero_is_refused() -> None:
    items: list[rlp.Item] = [b"\x01", b"\x52\x08", b"\x00" * 256, [], b"\x07", b""]
    with pytest.raises(ReceiptInvalid, match="depositReceiptVersion is 0"):
        receipt_status(b"\x7e" + rlp.encode(items))


def test_a_user_deposit_object_hashes_to_its_real_hash() -> None:
    """A user deposit (ETH minted on L2, sent to an account): mint and to are set, and the
    receipt carries the nonce the deposit used, which the tx itself does not state."""
    vector = load("op-stack-user-deposit")
    tx, receipt = vector["transactions"][0], vector["receipts"][0]
    leaf = encode_checked(tx).canonical
    decoded = decode_signed(leaf)
    assert (decoded.tx_hash, decoded.sender, decoded.nonce) == (tx["hash"], tx["from"], None)
    assert rlp.decode(leaf[1:])[3] == rlp.encode_uint(int(tx["mint"], 16))
    encoded = encode_receipt(receipt)
    assert rlp.decode(encoded[1:])[4:] == [b"\x02", b"\x01"]  # depositNonce 2, version 1


def test_a_set_code_tx_of_a_prague_block_rebuilds_from_its_tx_object() -> None:
    """The execution-apis test chain's first Prague block: its type-4 tx object rebuilds to
    the hash the block lists at its index, signer and all (the header is checked above)."""
    vector = load("hive-prague-45")
    tx = vector["transactions"][0]
    leaf = encode_checked(tx).canonical
    decoded = decode_signed(leaf)
    assert (decoded.tx_type, decoded.sender, decoded.nonce) == (4, tx["from"], int(tx["nonce"], 16))
    assert vector["block"]["transactions"][int(tx["transactionIndex"], 16)] == decoded.tx_hash
