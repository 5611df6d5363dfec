"""guard.tx_encode: signed txs rebuilt from a node's JSON tx objects.

The objects below are anvil 1.7.1's answers (``eth_getBlockByNumber(n, true)``) for txs of
types 0 (EIP-155), 1, 2, 3 and 4 signed with anvil's dev keys; each must rebuild to bytes of
its stated hash, and any changed field must be refused, never silently encoded.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from guard.hashing import keccak256
from guard.tx_encode import TxObjectMismatch, encode_checked, encode_tx
from guard.txs import TransactionError, canonical_bytes, decode_signed, transaction_hash

TO = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"
SENDER = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
ZERO_POINT = "0xc0" + "00" * 47

LEGACY: dict[str, Any] = {
    "type": "0x0", "chainId": "0x7a69", "nonce": "0x0", "gasPrice": "0x2540be400",
    "gas": "0x186a0", "to": TO, "value": "0x1", "input": "0x",
    "r": "0x38b028eb1ea0ccb27c61f639de3aad0bda9103b081cb667ac63e1611403db935",
    "s": "0x609d1265e09fe2bbf2396d627c59cf28df61da759c47911d9f570beda9903bae",
    "v": "0xf4f5",
    "hash": "0x157916493005343ddac975f5541b8bf6bc5812397fa3a6d0cefe4e66656eed43",
}  # fmt: skip
ACCESS_LIST: dict[str, Any] = {
    "type": "0x1", "chainId": "0x7a69", "nonce": "0x1", "gasPrice": "0x2540be400",
    "gas": "0x186a0", "to": TO, "value": "0x1",
    "accessList": [{"address": TO, "storageKeys": ["0x" + "00" * 32]}], "input": "0x",
    "r": "0xbeb8441b8a7eda2be1e7beae9a3a4a8a481de8915b4c8ccdb4535f65ec2dba9b",
    "s": "0xc1a56f7dd60f7a33f83e08d1704577f1bd53674ea39bfe4f983ed2fea383942",
    "yParity": "0x0", "v": "0x0",
    "hash": "0x49a3dd8896a04473e9091c08a88f3683943bab1d4fd0b42b310d567fe3a16bee",
}  # fmt: skip
DYNAMIC: dict[str, Any] = {
    "type": "0x2", "chainId": "0x7a69", "nonce": "0x2", "gas": "0x186a0",
    "maxFeePerGas": "0x2540be400", "maxPriorityFeePerGas": "0x1", "to": TO, "value": "0x1",
    "accessList": [], "input": "0x",
    "r": "0xa7c7eba95791c47e7af94a1e664bc0e182c57b2453ae47298270fb57af44db08",
    "s": "0x2a7ad4f9e3c313784da3e916a24838c919a473bb69ae0d830a901d42e79c9fff",
    "yParity": "0x0", "v": "0x0", "gasPrice": "0x3b9aca01",
    "hash": "0x6bfd4dca81eedf9fdcf8495cc5ceef37ef5a0aed0b881432800881c1963f81ef",
}  # fmt: skip
BLOB: dict[str, Any] = {
    "type": "0x3", "chainId": "0x7a69", "nonce": "0x0", "gas": "0x186a0",
    "maxFeePerGas": "0x2540be400", "maxPriorityFeePerGas": "0x1", "to": TO, "value": "0x1",
    "accessList": [],
    "blobVersionedHashes": [
        "0x010657f37554c781402a22917dee2f75def7ab966d7b770905398eba3c444014"
    ],
    "maxFeePerBlobGas": "0x2540be400", "input": "0x",
    "r": "0x691995d22488352db2588cbc1a2c1cbc0bd07492431fc445ff4c66361b6e65e6",
    "s": "0x1cecd8ee8e09a6eba3990f44a907a85de3b617b471153f7114a085a829875d24",
    "yParity": "0x0", "v": "0x0",
    "hash": "0x1d012314b064263672a599b3bdaf19faf731799dec58e5f2d63547ca0a4f7171",
}  # fmt: skip
SET_CODE: dict[str, Any] = {
    "type": "0x4", "chainId": "0x7a69", "nonce": "0x4", "gas": "0x186a0",
    "maxFeePerGas": "0x2540be400", "maxPriorityFeePerGas": "0x1", "to": TO, "value": "0x1",
    "accessList": [],
    "authorizationList": [{
        "chainId": "0x7a69", "address": "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc",
        "nonce": "0x5", "yParity": "0x0",
        "r": "0x68027eb6d3270904d8dd17d7c2c80f0f57d52e91c3fbddda2491110c4c794561",
        "s": "0x6adad645fd85d1c6ba6f94c23459820db02c3b898e75a816d50c0c6a719106dc",
    }],
    "input": "0x",
    "r": "0xf79b3a50a79d2a65f02d3b156b67bf8248e6b4e2cc9bba3042c9e1bc526684f0",
    "s": "0x52fbef4c7c676af061ea22800bf56b1b60706d43f4bf9dcc43c6744805d0ae0",
    "yParity": "0x1", "v": "0x1",
    "hash": "0xf035866dff3ea197eefd87c12f15a88d956330b48deb5ca32cf1ebb2c549fd1e",
}  # fmt: skip
OBJECTS: dict[str, dict[str, Any]] = {
    "legacy": LEGACY, "access_list": ACCESS_LIST, "dynamic": DYNAMIC, "blob": BLOB,
    "set_code": SET_CODE,
}  # fmt: skip


@pytest.mark.parametrize("kind", list(OBJECTS))
def test_each_type_rebuilds_to_its_hash_and_its_sender(kind: str) -> None:
    tx = OBJECTS[kind]
    encoded = encode_checked(tx)
    assert "0x" + keccak256(encoded.canonical).hex() == tx["hash"]
    assert encoded.network is None and encoded.committed == encoded.canonical
    signed = decode_signed(encoded.canonical)  # the signature still recovers the sender
    assert (signed.sender, signed.tx_type) == (SENDER, int(tx["type"], 16))


def _with_sidecar(wrapper: str) -> dict[str, Any]:
    tx = copy.deepcopy(BLOB)
    tx.update(blobs=["0x" + "00" * 131072], commitments=[ZERO_POINT])
    if wrapper == "7594":
        tx["cellProofs"] = [ZERO_POINT] * 128
    else:
        tx["proofs"] = [ZERO_POINT]
    return tx


@pytest.mark.parametrize("wrapper", ["4844", "7594"])
def test_blob_with_its_sidecar_gets_the_network_form_of_the_same_hash(wrapper: str) -> None:
    encoded = encode_checked(_with_sidecar(wrapper))
    assert encoded.network is not None and encoded.committed == encoded.network
    assert canonical_bytes(encoded.network) == encoded.canonical
    assert transaction_hash(encoded.network) == BLOB["hash"]
    assert decode_signed(encoded.network).network_form


@pytest.mark.parametrize(
    ("kind", "field", "value"),
    [
        ("legacy", "value", "0x2"),
        ("legacy", "v", "0xf4f6"),
        ("access_list", "accessList", []),
        ("dynamic", "maxPriorityFeePerGas", "0x2"),
        ("dynamic", "input", "0x00"),
        ("blob", "blobVersionedHashes", []),
        ("set_code", "nonce", "0x5"),
        ("dynamic", "hash", "0x" + "11" * 32),
    ],
)
def test_a_changed_field_is_refused_not_encoded(kind: str, field: str, value: Any) -> None:
    tx = copy.deepcopy(OBJECTS[kind])
    tx[field] = value
    with pytest.raises(TxObjectMismatch, match="rebuild bytes of another hash"):
        encode_checked(tx)


def test_a_changed_authorization_is_refused() -> None:
    tx = copy.deepcopy(SET_CODE)
    tx["authorizationList"][0]["nonce"] = "0x6"
    with pytest.raises(TxObjectMismatch):
        encode_checked(tx)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"type": "0x7d"}, "type 0x7d is not one this version encodes"),
        ({"type": "0x7e"}, "no 'sourceHash'"),  # an OP deposit's fields, not a 1559 tx's
        ({"gas": None}, "no 'gas'"),
        ({"maxFeePerGas": "12"}, "maxFeePerGas is not a 0x quantity"),
        ({"to": "0xzz"}, "to is not 0x hex"),
        ({"accessList": "none"}, "accessList is not a list"),
    ],
)
def test_malformed_objects_get_an_error_naming_the_field(
    change: dict[str, Any], message: str
) -> None:
    tx = {**DYNAMIC, **change}
    with pytest.raises(TransactionError, match=message):
        encode_tx(tx)


def test_contract_creation_has_an_empty_recipient() -> None:
    tx = {**LEGACY, "to": None}
    encoded = encode_tx(tx)
    assert encoded.canonical != encode_tx(LEGACY).canonical
    with pytest.raises(TxObjectMismatch):  # the signature was over a transfer to TO
        encode_checked(tx)


def test_the_tx_object_cache_keeps_full_blocks_within_its_bound() -> None:
    from chains.proofs import BLOB_WEIGHT, TxObjectCache

    cache = TxObjectCache(max_txs=10)
    cache.offer({"hash": "0xa", "transactions": ["0x" + "11" * 32]})  # hashes only: not kept
    assert cache.get("0xa") is None
    for name in ("0xb", "0xc", "0xd"):
        cache.offer({"hash": name, "transactions": [DYNAMIC] * 4})
    assert cache.get("0xb") is None  # 12 > 10: the oldest block went
    held = cache.get("0xc")
    assert held is not None and held["transactions"] == [DYNAMIC] * 4
    assert cache.get("0xd") is not None
    blob = _with_sidecar("4844")
    assert 1 + BLOB_WEIGHT > 10
    cache.offer({"hash": "0xe", "transactions": [blob]})  # weighs more than the whole bound
    assert cache.get("0xe") is None and cache.get("0xd") is not None
