"""The official Ethereum RLP and trie tests, every vector, against guard.rlp, chains.proofs.Trie
and guard.mpt.verify_proof.

Source: ethereum/tests, commit 4c87ebbf024a3e9ec842bcce90564f629a3bcd82, ``RLPTests/`` and
``TrieTests/`` (copied unchanged to tests/vectors/ethereum/, see the README there).

Conventions of the files (as the clients' runners read them): in ``rlptest.json`` an integer
``in`` is the big-endian integer, a string starting with ``#`` a big integer in decimal, any
other string its bytes; in the trie files a key or value starting with ``0x`` is hex, any
other its UTF-8 bytes, a null value deletes the key (so does an empty one: an Ethereum trie
holds no empty value). ``trietest*.json`` apply their pairs in order; ``trieanyorder*.json``
and ``hex_encoded_securetrie_test.json`` are maps. In a *secure* trie each key is
keccak256(key). Every remaining key's proof must walk back to its value under the root.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chains.proofs import EMPTY_TRIE_ROOT, Trie
from guard import rlp
from guard.hashing import keccak256
from guard.mpt import verify_proof

VECTORS = Path(__file__).parents[1] / "vectors" / "ethereum"


def _load(relative: str) -> list[Any]:
    cases = json.loads((VECTORS / relative).read_text())
    return [pytest.param(case, id=name) for name, case in cases.items()]


# -- RLP ----------------------------------------------------------------------------------------


def _item(value: Any) -> rlp.Item:
    """The RLP item an ``in`` of rlptest.json stands for."""
    if isinstance(value, list):
        return [_item(v) for v in value]
    if isinstance(value, int):
        return rlp.encode_uint(value)
    assert isinstance(value, str)
    if value.startswith("#"):
        return rlp.encode_uint(int(value[1:]))
    return value.encode("utf-8")


@pytest.mark.parametrize("case", _load("RLPTests/rlptest.json"))
def test_official_rlp_vector(case: dict[str, Any]) -> None:
    expected = bytes.fromhex(case["out"].removeprefix("0x"))
    assert rlp.encode(_item(case["in"])) == expected
    assert rlp.decode(expected) == _item(case["in"])


@pytest.mark.parametrize("case", _load("RLPTests/invalidRLPTest.json"))
def test_official_invalid_rlp_vector_is_refused(case: dict[str, Any]) -> None:
    assert case["in"] == "INVALID"
    with pytest.raises(rlp.RlpError):
        rlp.decode(bytes.fromhex(case["out"].removeprefix("0x")))


# -- tries --------------------------------------------------------------------------------------


def _bytes(text: str) -> bytes:
    return bytes.fromhex(text[2:]) if text.startswith("0x") else text.encode("utf-8")


def _final_items(pairs: Any, secure: bool) -> dict[bytes, bytes]:
    """The trie's content after the vector's inserts, updates and deletes."""
    ordered = pairs.items() if isinstance(pairs, dict) else pairs
    items: dict[bytes, bytes] = {}
    for key_text, value_text in ordered:
        key = _bytes(key_text)
        key = keccak256(key) if secure else key
        if value_text is None or _bytes(value_text) == b"":
            items.pop(key, None)
        else:
            items[key] = _bytes(value_text)
    return items


TRIE_FILES = [
    ("TrieTests/trietest.json", False),
    ("TrieTests/trieanyorder.json", False),
    ("TrieTests/trietest_secureTrie.json", True),
    ("TrieTests/trieanyorder_secureTrie.json", True),
    ("TrieTests/hex_encoded_securetrie_test.json", True),
]

TRIE_CASES = [
    pytest.param(case.values[0], secure, id=f"{Path(name).stem}/{case.id}")
    for name, secure in TRIE_FILES
    for case in _load(name)
]


@pytest.mark.parametrize(("case", "secure"), TRIE_CASES)
def test_official_trie_vector(case: dict[str, Any], secure: bool) -> None:
    items = _final_items(case["in"], secure)
    trie = Trie.of_items(items)
    assert "0x" + trie.root.hex() == case["root"]
    for key, value in items.items():
        assert verify_proof(trie.root, key, trie.prove(key)) == value
    if not items:
        assert trie.root == EMPTY_TRIE_ROOT


def test_a_key_that_prefixes_another_is_held_in_a_branch() -> None:
    """An acceptance test found the builder raising IndexError here (the official
    ``branch-value-update`` and ``testy`` vectors need it too)."""
    trie = Trie.of_items({b"do": b"verb", b"dog": b"puppy", b"doge": b"coin"})
    for key, value in {b"do": b"verb", b"dog": b"puppy", b"doge": b"coin"}.items():
        assert verify_proof(trie.root, key, trie.prove(key)) == value
    with pytest.raises(KeyError):
        trie.prove(b"d")
