"""The verifier's building blocks, offline: RLP, tries and proofs, headers, signed txs, and
the EIP-712 message, each checked against an independent implementation or a known value."""

from __future__ import annotations

from typing import Any

import pytest
import rlp as pyrlp
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak
from hypothesis import given, settings
from hypothesis import strategies as st

from chains.proofs import encode_receipt, index_key, trie_proof
from guard import rlp
from guard.eip712 import signing_hash, typed_data
from guard.headers import HeaderError, header_hash
from guard.mpt import ProofError, verify_proof
from guard.txs import TransactionError, decode_signed, transaction_hash

# -- RLP ----------------------------------------------------------------------------------------

items = st.recursive(
    st.binary(max_size=80), lambda children: st.lists(children, max_size=6), max_leaves=30
)


@settings(max_examples=300, deadline=None)
@given(items)
def test_rlp_matches_pyrlp_and_round_trips(item: Any) -> None:
    encoded = rlp.encode(item)
    assert encoded == pyrlp.encode(item)
    assert pyrlp.encode(rlp.decode(encoded)) == encoded


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\x81\x05", "single byte"),  # 0x05 must be encoded as itself
        (b"\xb8\x05hello", "below 56"),  # long form for a short string
        (b"\xb9\x00\x40" + b"a" * 64, "leading zero"),
        (b"\x83ab", "runs past"),
        (b"\x80\x80", "trailing"),
        (b"", "ends"),
    ],
)
def test_rlp_decode_refuses_non_canonical_input(data: bytes, why: str) -> None:
    with pytest.raises(rlp.RlpError, match=why):
        rlp.decode(data)


# -- tries and proofs -----------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(st.binary(min_size=1, max_size=60), min_size=1, max_size=300),
    data=st.data(),
)
def test_every_index_of_a_built_trie_has_a_proof_that_verifies(
    values: list[bytes], data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(values) - 1))
    root, proof = trie_proof(values, index)
    assert trie_proof(values, 0)[0] == root  # one root, whatever is proven
    assert verify_proof(root, index_key(index), proof) == values[index]
    # Short values make nodes under 32 bytes, embedded in their parents: same walk.


def test_proof_failures_name_the_node() -> None:
    values = [bytes([i]) * 40 for i in range(40)]
    root, proof = trie_proof(values, 17)
    assert len(proof) >= 2
    with pytest.raises(ProofError, match=f"node {len(proof) - 1} missing"):
        verify_proof(root, index_key(17), proof[:-1])
    with pytest.raises(ProofError, match="extra node"):
        verify_proof(root, index_key(17), [*proof, proof[-1]])
    with pytest.raises(ProofError, match="node 0 does not hash to the reference in the root"):
        verify_proof(b"\x00" * 32, index_key(17), proof)
    with pytest.raises(ProofError, match=r"key not in the trie|does not hash"):
        verify_proof(root, index_key(99), proof)
    changed = [*proof]
    changed[1] = changed[1][:-1] + bytes([changed[1][-1] ^ 1])
    with pytest.raises(ProofError, match="node 1 does not hash to the reference in node 0"):
        verify_proof(root, index_key(17), changed)


def test_known_roots() -> None:
    # A trie of one receipt-like value: root = keccak(rlp([hex-prefix(key), value])).
    from guard.hashing import keccak256
    from guard.mpt import encode_path

    value = b"v" * 40
    leaf = rlp.encode([encode_path([8, 0], leaf=True), value])  # key rlp(0) = 0x80
    assert trie_proof([value], 0) == (keccak256(leaf), [leaf])


def test_receipt_encoding_typed_and_legacy() -> None:
    raw = {
        "type": "0x2",
        "status": "0x1",
        "cumulativeGasUsed": "0x5208",
        "logsBloom": "0x" + "00" * 256,
        "logs": [{"address": "0x" + "11" * 20, "topics": ["0x" + "22" * 32], "data": "0x0102"}],
    }
    encoded = encode_receipt(raw)
    assert encoded[0] == 2
    assert pyrlp.decode(encoded[1:]) == [
        b"\x01",
        b"\x52\x08",
        b"\x00" * 256,
        [[b"\x11" * 20, [b"\x22" * 32], b"\x01\x02"]],
    ]
    legacy = encode_receipt({**raw, "type": "0x0", "status": "0x0"})
    assert legacy[0] >= 0xC0 and pyrlp.decode(legacy)[0] == b""


# -- headers ------------------------------------------------------------------------------------

MAINNET_GENESIS = {
    "parentHash": "0x" + "00" * 32,
    "sha3Uncles": "0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347",
    "miner": "0x" + "00" * 20,
    "stateRoot": "0xd7f8974fb5ac78d9ac099b9ad5018bedc2ce0a72dad1827a1709da30580f0544",
    "transactionsRoot": "0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421",
    "receiptsRoot": "0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421",
    "logsBloom": "0x" + "00" * 256,
    "difficulty": "0x400000000",
    "number": "0x0",
    "gasLimit": "0x1388",
    "gasUsed": "0x0",
    "timestamp": "0x0",
    "extraData": "0x11bbe8db4e347b4e8c937c1c8370e4b5ed33adb3db69cbdb7a38e1e50b1b82fa",
    "mixHash": "0x" + "00" * 32,
    "nonce": "0x0000000000000042",
}


def test_mainnet_genesis_hash() -> None:
    expected = "0xd4e56740f876aef8c010b86a40d5f56745a118d0906a34e69aec8c0db1cb8fa3"
    assert header_hash(MAINNET_GENESIS) == expected  # nonce as 8 raw bytes, not a quantity


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"nonce": "0x42"}, "nonce must be 8 bytes"),
        ({"number": "0x00"}, "not a canonical hex quantity"),
        ({"miner": "0x" + "AB" * 20}, "lower-case"),
        ({"foo": "0x1"}, "unknown field 'foo'"),
        ({"baseFeePerGas": 7}, "must be a 0x hex string"),
    ],
)
def test_malformed_headers_are_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(HeaderError, match=message):
        header_hash({**MAINNET_GENESIS, **change})


def test_optional_fields_are_skipped_when_absent_not_encoded_empty() -> None:
    with_gap = {**MAINNET_GENESIS, "baseFeePerGas": "0x7", "blobGasUsed": "0x0"}
    a = header_hash(with_gap)
    b = header_hash({**with_gap, "withdrawalsRoot": "0x" + "00" * 32})
    assert a != b != header_hash(MAINNET_GENESIS)


# -- signed transactions --------------------------------------------------------------------------

KEY = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
ACCOUNT = Account.from_key(KEY)
TO = to_checksum_address("0x" + "11" * 20)


def _signed(**fields: Any) -> tuple[bytes, str]:
    tx = {"nonce": 5, "to": TO, "value": 1, "gas": 21000, **fields}
    signed = ACCOUNT.sign_transaction(tx)
    return bytes(signed.raw_transaction), "0x" + bytes(signed.hash).hex()


@pytest.mark.parametrize(
    "fields",
    [
        {"gasPrice": 1},  # legacy, no chain id: v = 27/28
        {"gasPrice": 1, "chainId": 1},  # legacy, EIP-155
        {"gasPrice": 1, "chainId": 1, "accessList": []},  # type 1
        {"maxFeePerGas": 2, "maxPriorityFeePerGas": 1, "chainId": 1},  # type 2
    ],
    ids=["legacy", "eip155", "type1", "type2"],
)
def test_sender_nonce_and_hash_are_recovered(fields: dict[str, Any]) -> None:
    raw, tx_hash = _signed(**fields)
    decoded = decode_signed(raw)
    assert decoded.sender == ACCOUNT.address.lower()
    assert (decoded.nonce, decoded.tx_hash) == (5, tx_hash)
    assert transaction_hash(raw) == tx_hash


def test_set_code_tx_is_recovered() -> None:
    auth = ACCOUNT.sign_authorization({"chainId": 1, "address": TO, "nonce": 6})
    raw, tx_hash = _signed(
        maxFeePerGas=2, maxPriorityFeePerGas=1, chainId=1, authorizationList=[auth]
    )
    assert raw[0] == 4
    decoded = decode_signed(raw)
    assert (decoded.sender, decoded.tx_type, decoded.tx_hash) == (
        ACCOUNT.address.lower(),
        4,
        tx_hash,
    )


@pytest.mark.parametrize("wrapper", ["4844", "7594"])
def test_blob_tx_hash_is_taken_without_its_sidecar(wrapper: str) -> None:
    canonical, tx_hash = _signed(
        type=3,
        maxFeePerGas=2,
        maxPriorityFeePerGas=1,
        maxFeePerBlobGas=1,
        chainId=1,
        blobVersionedHashes=[b"\x01" + b"\x00" * 31],
    )
    fields = rlp.decode(canonical[1:])
    point = b"\xc0" + b"\x00" * 47
    sidecar: list[rlp.Item] = (
        [[b"\x00" * 64], [point], [point]]
        if wrapper == "4844"
        else [b"\x01", [b"\x00" * 64], [point], [point] * 128]
    )
    network = b"\x03" + rlp.encode([fields, *sidecar])
    assert transaction_hash(canonical) == transaction_hash(network) == tx_hash
    decoded = decode_signed(network)
    assert decoded.network_form and decoded.sender == ACCOUNT.address.lower()
    bad = b"\x03" + rlp.encode([fields, b"\x02", [b""], [point], [point]])
    with pytest.raises(TransactionError, match="neither"):
        transaction_hash(bad)


def test_high_s_signature_is_refused() -> None:
    raw, _ = _signed(maxFeePerGas=2, maxPriorityFeePerGas=1, chainId=1)
    fields = rlp.decode(raw[1:])
    assert isinstance(fields, list)
    n = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
    s = int.from_bytes(fields[-1], "big")
    fields[-1] = rlp.encode_uint(n - s)
    fields[-3] = rlp.encode_uint(1 - int.from_bytes(fields[-3], "big"))
    with pytest.raises(TransactionError, match="not low"):
        decode_signed(b"\x02" + rlp.encode(fields))


# -- EIP-712 ------------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(
    kind=st.text(max_size=40),
    chain_id=st.integers(1, 2**53),
    tx=st.binary(min_size=32, max_size=32),
    sid=st.text(max_size=40),
    issued=st.integers(0, 2**53),
    body=st.binary(min_size=32, max_size=32),
)
def test_eip712_hash_matches_eth_account(
    kind: str, chain_id: int, tx: bytes, sid: str, issued: int, body: bytes
) -> None:
    ours = signing_hash(kind, chain_id, tx, sid, issued, body)
    message = typed_data(kind, chain_id, "0x" + tx.hex(), sid, issued, "0x" + body.hex())
    signable = encode_typed_data(full_message=message)
    theirs = keccak(b"\x19" + signable.version + signable.header + signable.body)
    assert ours == theirs


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.binary(min_size=1, max_size=70), min_size=1, max_size=200))
def test_roots_match_an_independent_trie_implementation(values: list[bytes]) -> None:
    from trie.hexary import HexaryTrie

    reference = HexaryTrie({})
    for i, value in enumerate(values):
        reference[index_key(i)] = value
    assert trie_proof(values, len(values) // 2)[0] == reference.root_hash
