"""Ancestry by the EIP-2935 history contract (guard/history.py), checked offline.

Against what nobody here wrote: py-trie builds state and storage tries and cuts their
proofs (an independent Merkle-Patricia implementation), real mainnet ``eth_getProof``
answers (tests/vectors/history/, provenance in its README) are walked from their block's
``stateRoot``, and the receipt vectors were built by the daemon from anvil blocks. Every
tampered receipt is refused with its reason.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import rlp as pyrlp
from hypothesis import given, settings
from hypothesis import strategies as st
from trie.hexary import HexaryTrie

from guard import rlp
from guard.errors import ReceiptInvalid
from guard.hashing import keccak256
from guard.header_chain import decode_header_chain, encode_header_chain
from guard.headers import header_hash, header_json
from guard.history import (
    HISTORY_CODE_HASH,
    HISTORY_SERVE_WINDOW,
    HISTORY_STORAGE_ADDRESS,
    history_slot,
    in_window,
    verify_history_ancestry,
)
from guard.mpt import verify_proof
from guard.verify import verify_receipt
from tests.unit.receipt_vectors_gen import _apply

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
HISTORY = json.loads((VECTORS / "receipts" / "finality_history_storage.json").read_text())
FALLBACK = json.loads((VECTORS / "receipts" / "finality_header_chain_no_contract.json").read_text())


def _hex(data: bytes) -> str:
    return "0x" + data.hex()


# -- the EIP's rules ---------------------------------------------------------------------


def test_the_code_hash_is_the_one_a_node_reports_for_the_contract() -> None:
    # anvil 1.7.1 and mainnet report this codeHash for 0x0000F908…2935 (alloy-eips'
    # HISTORY_STORAGE_CODE hashes to it too).
    assert _hex(HISTORY_CODE_HASH) == (
        "0x6e49e66782037c0555897870e29fa5e552daf4719552131a0abce779daec0a5d"
    )


def test_the_window_is_the_8191_blocks_below_h() -> None:
    assert not in_window(100, 100)  # H's own hash is written by H + 1
    assert in_window(100, 101)
    assert in_window(100, 100 + HISTORY_SERVE_WINDOW)
    assert not in_window(100, 101 + HISTORY_SERVE_WINDOW)  # overwritten by then
    assert history_slot(8191) == history_slot(0) == b"\x00" * 32
    assert history_slot(8192) == (1).to_bytes(32, "big")


# -- against py-trie ---------------------------------------------------------------------


def _state(
    others: list[bytes], slots: dict[int, int], code_hash: bytes = HISTORY_CODE_HASH
) -> tuple[bytes, list[str], dict[int, list[str]], bytes]:
    """(state root, account proof, storage proofs by slot, storage root): py-trie's tries
    of the contract with ``slots`` among accounts keyed by ``others``."""
    storage = HexaryTrie({})
    for slot, word in slots.items():
        storage[keccak256(slot.to_bytes(32, "big"))] = pyrlp.encode(word)
    state = HexaryTrie({})
    for i, key in enumerate(others):
        state[keccak256(key)] = pyrlp.encode([i, 10**18, b"\x11" * 32, b"\x22" * 32])
    contract = keccak256(bytes.fromhex(HISTORY_STORAGE_ADDRESS[2:]))
    state[contract] = pyrlp.encode([0, 0, storage.root_hash, code_hash])
    account = [_hex(pyrlp.encode(n)) for n in state.get_proof(contract)]
    proofs = {
        slot: [
            _hex(pyrlp.encode(n)) for n in storage.get_proof(keccak256(slot.to_bytes(32, "big")))
        ]
        for slot in slots
    }
    return state.root_hash, account, proofs, storage.root_hash


def _head(number: int, state_root: bytes) -> tuple[int, str, dict[str, str]]:
    return number, "0x" + "ee" * 32, {"stateRoot": _hex(state_root)}


@settings(max_examples=40, deadline=None)
@given(
    others=st.lists(st.binary(min_size=20, max_size=20), max_size=60, unique=True),
    hashes=st.lists(st.binary(min_size=32, max_size=32), min_size=1, max_size=40),
    distance=st.integers(min_value=1, max_value=HISTORY_SERVE_WINDOW),
)
def test_proofs_py_trie_cuts_verify_and_show_the_stored_hash(
    others: list[bytes], hashes: list[bytes], distance: int
) -> None:
    block = 50_000
    slots = {
        (block - i) % HISTORY_SERVE_WINDOW: int.from_bytes(h, "big") for i, h in enumerate(hashes)
    }
    wanted = slots[block % HISTORY_SERVE_WINDOW]
    if wanted == 0:
        return  # a zero word is not stored at all
    root, account, storage, storage_root = _state(others, slots)
    ancestry = {
        "kind": "history_storage",
        "header": {},
        "account_proof": account,
        "storage_proof": storage[block % HISTORY_SERVE_WINDOW],
    }
    link = verify_history_ancestry(
        ancestry, block, f"0x{wanted:064x}", _head(block + distance, root)
    )
    assert link.depth == distance + 1
    value = verify_proof(
        storage_root,
        keccak256(history_slot(block)),
        [bytes.fromhex(n[2:]) for n in ancestry["storage_proof"]],
    )
    assert (
        HexaryTrie.get_from_proof(
            storage_root,
            keccak256(history_slot(block)),
            tuple(pyrlp.decode(bytes.fromhex(n[2:])) for n in ancestry["storage_proof"]),
        )
        == value
    )


def test_a_hash_with_leading_zero_bytes_is_stored_without_them() -> None:
    block_hash = 0x0000ABCD << (8 * 28)
    root, account, storage, _ = _state([b"\x01" * 20], {7: block_hash})
    ancestry = {"kind": "history_storage", "account_proof": account, "storage_proof": storage[7]}
    link = verify_history_ancestry(ancestry, 7, f"0x{block_hash:064x}", _head(8, root))
    assert link.depth == 2


def test_another_contract_at_the_address_is_refused() -> None:
    root, account, storage, _ = _state([], {7: 0xAB}, code_hash=b"\x33" * 32)
    ancestry = {"kind": "history_storage", "account_proof": account, "storage_proof": storage[7]}
    with pytest.raises(ReceiptInvalid, match="is not the history contract's code"):
        verify_history_ancestry(ancestry, 7, f"0x{0xAB:064x}", _head(8, root))


def test_a_slot_holding_another_blocks_hash_is_refused() -> None:
    """Block 7 + 8191 wrote slot 7 with block 8198's hash: B = 7 is no longer proven."""
    root, account, storage, _ = _state([], {7: 0xBB})
    ancestry = {"kind": "history_storage", "account_proof": account, "storage_proof": storage[7]}
    with pytest.raises(ReceiptInvalid, match="not the hash of block 7"):
        verify_history_ancestry(ancestry, 7, f"0x{0xAA:064x}", _head(100, root))


def test_a_proof_of_another_state_is_refused() -> None:
    root, account, storage, _ = _state([b"\x02" * 20], {7: 0xAB})
    other_root, *_ = _state([b"\x03" * 20], {7: 0xAB})
    ancestry = {"kind": "history_storage", "account_proof": account, "storage_proof": storage[7]}
    with pytest.raises(ReceiptInvalid, match="account_proof: node 0 does not hash"):
        verify_history_ancestry(ancestry, 7, f"0x{0xAB:064x}", _head(8, other_root))
    assert verify_history_ancestry(ancestry, 7, f"0x{0xAB:064x}", _head(8, root)).depth == 2


# -- real mainnet eth_getProof answers ---------------------------------------------------


def _nodes(values: list[str]) -> list[bytes]:
    return [bytes.fromhex(v[2:]) for v in values]


def test_a_mainnet_account_proof_walks_from_its_blocks_state_root() -> None:
    data = json.loads((VECTORS / "history" / "mainnet-21824259-account.json").read_text())
    block, answer = data["block"], data["eth_getProof"]
    assert header_hash(header_json(block)) == block["hash"]  # the header the root is from
    account = verify_proof(
        bytes.fromhex(block["stateRoot"][2:]),
        keccak256(bytes.fromhex(answer["address"][2:])),
        _nodes(answer["accountProof"]),
    )
    fields = rlp.decode(account)
    assert isinstance(fields, list) and all(isinstance(f, bytes) for f in fields)
    nonce, balance, storage_root, code_hash = (f for f in fields if isinstance(f, bytes))
    assert int.from_bytes(nonce, "big") == int(answer["nonce"], 16)
    assert int.from_bytes(balance, "big") == int(answer["balance"], 16)
    assert (_hex(storage_root), _hex(code_hash)) == (answer["storageHash"], answer["codeHash"])
    tampered = _nodes(answer["accountProof"])
    tampered[4] = tampered[4][:-1] + bytes([tampered[4][-1] ^ 1])
    with pytest.raises(ValueError, match="node 4 does not hash"):
        verify_proof(
            bytes.fromhex(block["stateRoot"][2:]),
            keccak256(bytes.fromhex(answer["address"][2:])),
            tampered,
        )


def test_mainnet_storage_proofs_give_the_values_the_node_stated() -> None:
    answer = json.loads((VECTORS / "history" / "mainnet-usdc-storage.json").read_text())
    answer = answer["eth_getProof"]
    nodes = _nodes(answer["accountProof"])
    account = rlp.decode(
        verify_proof(keccak256(nodes[0]), keccak256(bytes.fromhex(answer["address"][2:])), nodes)
    )
    assert isinstance(account, list)
    storage_root = account[2]
    assert isinstance(storage_root, bytes) and _hex(storage_root) == answer["storageHash"]
    assert len(answer["storageProof"]) == 3
    for entry in answer["storageProof"]:
        value = verify_proof(
            storage_root,
            keccak256(int(entry["key"], 16).to_bytes(32, "big")),
            _nodes(entry["proof"]),
        )
        word = rlp.decode(value)
        assert isinstance(word, bytes) and int.from_bytes(word, "big") == int(entry["value"], 16)


# -- receipts: the vectors and their tampering --------------------------------------------


def test_the_history_vector_proves_depth_64_with_one_header_in_a_fraction_of_the_bytes() -> None:
    verified = verify_receipt(HISTORY["receipt"], trusted_signers=HISTORY["trusted_signers"])
    assert verified.facts.confirmations == 64
    assert verified.facts.ancestry == "history_storage"
    proof = HISTORY["receipt"]["proof"]
    assert len(proof["headers"]) == 1
    assert verified.anchor is not None and verified.anchor[0] == 64
    assert verified.anchor == tuple(HISTORY["expected"]["anchor"])
    assert len(json.dumps(HISTORY["receipt"])) < 10_000


def test_the_fallback_vector_says_why_it_carries_headers() -> None:
    verified = verify_receipt(FALLBACK["receipt"], trusted_signers=FALLBACK["trusted_signers"])
    assert verified.facts.confirmations == len(FALLBACK["receipt"]["proof"]["headers"]) == 12
    assert verified.facts.ancestry == "header_chain (no_history_contract)"


def _forged_inclusion_block(receipt: dict[str, Any]) -> dict[str, Any]:
    """The inclusion header with another extraData and its own recomputed hash (and the
    evidence naming it): only the history proof can tell it is not the chain's block."""
    out = _apply(receipt, ["proof", "headers", 0, "extraData"], "0x01")
    header = out["proof"]["headers"][0]
    header["hash"] = header_hash(header)
    out["evidence"]["facts"]["block_hash"] = header["hash"]
    return out


TAMPERS: list[tuple[str, list[Any], Any, str]] = [
    ("kind", ["proof", "ancestry", "kind"], "history", "proof.ancestry.kind: 'history' is not"),
    (
        "head_state_root",
        ["proof", "ancestry", "header", "rlp"],
        "state-root",
        "account_proof: node 0 does not hash to the reference in stateRoot of block 64",
    ),
    (
        "head_format",
        ["proof", "ancestry", "header", "format"],
        "rlp/2",
        "proof.ancestry.header.format: 'rlp/2' is not 'rlp-linked/1'",
    ),
    (
        "head_not_base64",
        ["proof", "ancestry", "header", "rlp"],
        "not base64!",
        "proof.ancestry.header.rlp: not base64",
    ),
    ("account_node_dropped", ["proof", "ancestry", "account_proof"], "drop-last", "node 1 missing"),
    (
        "account_node_changed",
        ["proof", "ancestry", "account_proof", 1],
        "flip-middle",
        "account_proof: node 1 does not hash to the reference",
    ),
    ("storage_node_dropped", ["proof", "ancestry", "storage_proof"], "drop-last", "node 3 missing"),
    (
        "storage_node_changed",
        ["proof", "ancestry", "storage_proof", 0],
        "flip-middle",
        "storage_proof: node 0 does not hash to the reference",
    ),
    (
        "storage_proof_empty",
        ["proof", "ancestry", "storage_proof"],
        [],
        "proof.ancestry.storage_proof: needs at least 1 item",
    ),
    (
        "depth_claimed",
        ["finality", "confirmations"],
        "plus-one",
        "finality.confirmations: 65 is not the depth the headers show (64)",
    ),
]


@pytest.mark.parametrize(("name", "path", "change", "reason"), TAMPERS, ids=[t[0] for t in TAMPERS])
def test_a_tampered_history_receipt_is_refused_with_its_reason(
    name: str, path: list[Any], change: Any, reason: str
) -> None:
    if change == "state-root":  # another stateRoot inside H's RLP
        receipt = copy.deepcopy(HISTORY["receipt"])
        header = receipt["proof"]["ancestry"]["header"]
        [(_, _, fields)] = decode_header_chain(header, "h")
        old = bytes.fromhex(fields["stateRoot"][2:])
        data = base64.b64decode(header["rlp"]).replace(old, b"\x11" * 32)
        header["rlp"] = base64.b64encode(data).decode("ascii")
    else:
        receipt = _apply(HISTORY["receipt"], path, change)
    with pytest.raises(ReceiptInvalid) as caught:
        verify_receipt(receipt, trusted_signers=HISTORY["trusted_signers"])
    assert reason in caught.value.reason, caught.value.reason


@pytest.mark.parametrize(("key", "value"), [("slot", "0x01"), ("reason", "smaller")])
def test_a_field_the_history_ancestry_does_not_have_is_refused(key: str, value: str) -> None:
    receipt = copy.deepcopy(HISTORY["receipt"])
    receipt["proof"]["ancestry"][key] = value
    with pytest.raises(ReceiptInvalid) as caught:
        verify_receipt(receipt)
    assert f"proof.ancestry.{key}: is not a field of this receipt" in caught.value.reason


def test_a_forged_inclusion_block_is_not_in_the_heads_state() -> None:
    with pytest.raises(ReceiptInvalid) as caught:
        verify_receipt(_forged_inclusion_block(HISTORY["receipt"]))
    assert "not the hash of block 1" in caught.value.reason


def test_the_head_must_be_above_the_block_within_the_window() -> None:
    inclusion = HISTORY["receipt"]["proof"]["headers"][0]
    receipt = _apply(
        HISTORY["receipt"], ["proof", "ancestry", "header"], encode_header_chain([inclusion])
    )
    with pytest.raises(ReceiptInvalid) as caught:
        verify_receipt(receipt)
    assert "block 1 is not 1 to 8191 blocks above block 1" in caught.value.reason


def test_headers_beside_a_history_proof_are_refused() -> None:
    receipt = _apply(
        HISTORY["receipt"], ["proof", "headers"], FALLBACK["receipt"]["proof"]["headers"][:2]
    )
    with pytest.raises(ReceiptInvalid) as caught:
        verify_receipt(receipt)
    assert "goes with the inclusion block's header alone, not 2 headers" in caught.value.reason


def test_without_its_ancestry_the_receipt_shows_depth_1_only() -> None:
    receipt = {**HISTORY["receipt"], "proof": dict(HISTORY["receipt"]["proof"])}
    del receipt["proof"]["ancestry"]
    with pytest.raises(ReceiptInvalid) as caught:
        verify_receipt(receipt)
    assert "the headers show depth 1, below the required 64" in caught.value.reason


def test_an_unknown_header_chain_reason_is_refused() -> None:
    receipt = _apply(FALLBACK["receipt"], ["proof", "ancestry", "reason"], "cheaper")
    with pytest.raises(ReceiptInvalid) as caught:
        verify_receipt(receipt)
    assert "proof.ancestry.reason: 'cheaper' is not one of" in caught.value.reason


def test_a_history_receipt_resealed_after_tampering_still_fails_on_the_evidence() -> None:
    """Re-signing does not help: the checks of the evidence come before the seal's."""
    from tests.integration.receipts_helpers import SIGNING_KEY
    from watcher.receipts.signer import Signer

    signer = Signer(SIGNING_KEY, "env")
    body = {
        k: v
        for k, v in _forged_inclusion_block(HISTORY["receipt"]).items()
        if k not in ("digest", "signature")
    }
    with pytest.raises(ReceiptInvalid) as caught:
        verify_receipt(signer.sign(body), trusted_signers=[signer.address])
    assert "not the hash of block 1" in caught.value.reason
