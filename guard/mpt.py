"""Merkle-Patricia proofs: show that a trie with a known root holds a value at a key.

A block header commits to its transactions and to their receipts through the roots of two
tries (``transactionsRoot``, ``receiptsRoot``), each keyed by ``rlp(index in block)``. A
proof is the list of trie nodes on the path from the root to that key, each RLP-encoded.

The walk, from the root hash and the key's nibbles (half-bytes, high first):

* a node referenced by a 32-byte hash must be the next node of the proof, and hash to it;
  a node shorter than 32 bytes is embedded in its parent instead of referenced;
* a **branch** (17 items) follows the child at the next nibble; its 17th item is the value
  of a key that ends here;
* an **extension** (2 items, even/odd flag 0 or 1) skips a shared run of nibbles;
* a **leaf** (2 items, flag 2 or 3) holds the rest of the key and the value.

The flag is the first nibble of the hex-prefix encoded path (yellow paper, appendix C):
bit 1 says leaf, bit 0 says the path has an odd number of nibbles (the second nibble is
then the first nibble of the path; otherwise the second nibble is padding and must be 0).

Nodes are numbered from 0 in error messages: ``node 3 missing`` means the proof has only
three nodes where the walk needed a fourth.
"""

from __future__ import annotations

from collections.abc import Sequence

from guard import rlp
from guard.errors import GuardError
from guard.hashing import keccak256


class ProofError(GuardError, ValueError):
    """A proof that does not show the value at the key under the root."""


def nibbles(key: bytes) -> list[int]:
    """The half-bytes of ``key``, high nibble first."""
    out: list[int] = []
    for byte in key:
        out += (byte >> 4, byte & 0x0F)
    return out


def decode_path(encoded: bytes) -> tuple[list[int], bool]:
    """A hex-prefix encoded path: (its nibbles, whether the node is a leaf)."""
    if not encoded:
        raise ProofError("empty hex-prefix path")
    flag = encoded[0] >> 4
    if flag > 3:
        raise ProofError(f"hex-prefix flag {flag} is not 0..3")
    path = nibbles(encoded)
    if flag & 1:
        path = path[1:]
    else:
        if path[1] != 0:
            raise ProofError("hex-prefix padding nibble is not 0")
        path = path[2:]
    return path, bool(flag & 2)


def encode_path(path: Sequence[int], leaf: bool) -> bytes:
    """Hex-prefix encoding of ``path`` (the inverse of :func:`decode_path`)."""
    flag = 2 if leaf else 0
    full = [flag + 1, *path] if len(path) % 2 else [flag, 0, *path]
    return bytes(full[i] * 16 + full[i + 1] for i in range(0, len(full), 2))


def _next_node(
    reference: rlp.Item, proof: Sequence[bytes], used: int, where: str
) -> tuple[rlp.Item, str, int]:
    """(the node ``reference`` points at, its name in messages, proof nodes used so far).

    A 32-byte reference is the hash of the next proof node, which must hash to it and
    decode; anything else is a node embedded in its parent (no hash to check)."""
    if not isinstance(reference, bytes):
        return reference, f"a node embedded in {where}", used
    if len(reference) != 32:
        raise ProofError(f"{where} has a child reference of {len(reference)} bytes")
    if used >= len(proof):
        raise ProofError(f"node {used} missing")
    raw = proof[used]
    if keccak256(raw) != reference:
        raise ProofError(f"node {used} does not hash to the reference in {where}")
    try:
        node = rlp.decode(raw)
    except rlp.RlpError as exc:
        raise ProofError(f"node {used} is not valid RLP: {exc}") from exc
    return node, f"node {used}", used + 1


def verify_proof(
    root: bytes, key: bytes, proof: Sequence[bytes], root_name: str = "the root"
) -> bytes:
    """The value stored at ``key`` in the trie whose root hash is ``root``, shown by ``proof``.

    ``root_name`` names the root in messages (``receiptsRoot of block 812``).

    Raises :class:`ProofError` naming the node where the walk failed: a missing node, a node
    that does not hash to its reference, a malformed node, a key the trie does not hold, or
    nodes left over after the value was reached.
    """
    path = nibbles(key)
    pos = 0
    used = 0
    reference: rlp.Item = root
    where = root_name
    while True:
        node, where, used = _next_node(reference, proof, used, where)
        if isinstance(node, bytes):
            raise ProofError(f"{where} is a string, not a node")
        if len(node) == 17:
            if pos == len(path):
                value = node[16]
                break
            child = node[path[pos]]
            if child == b"":
                raise ProofError(
                    f"key not in the trie: {where} has no child at nibble {path[pos]:x}"
                )
            pos += 1
            reference = child
        elif len(node) == 2:
            encoded = node[0]
            if not isinstance(encoded, bytes):
                raise ProofError(f"{where} has a list where its path should be")
            try:
                segment, leaf = decode_path(encoded)
            except ProofError as exc:
                raise ProofError(f"{where}: {exc}") from exc
            if path[pos : pos + len(segment)] != segment:
                raise ProofError(f"key not in the trie: {where} leads elsewhere")
            pos += len(segment)
            if leaf:
                if pos != len(path):
                    raise ProofError(f"key not in the trie: {where} is a leaf for a longer key")
                value = node[1]
                break
            reference = node[1]
        else:
            raise ProofError(f"{where} has {len(node)} items (a node has 2 or 17)")
    if not isinstance(value, bytes) or value == b"":
        raise ProofError(f"key not in the trie: {where} holds no value for it")
    if used != len(proof):
        raise ProofError(f"{len(proof) - used} extra node(s) after the value in {where}")
    return value
