"""SSZ merkleization: the hash tree roots and Merkle branches beacon light clients check.

The beacon chain commits to everything by ``hash_tree_root`` (consensus-specs,
``ssz/simple-serialize.md``): a value is cut into 32-byte chunks, the chunks are padded with
zero chunks to a power of two and hashed pairwise with SHA-256 up to one root. A container's
root is the merkleization of its fields' roots; a list's root mixes its length in. A light
client never holds a whole beacon state: it holds one leaf (a header's root, a committee's
root) and the sibling hashes on the way up (a *branch*), and recomputes the root it trusts.

A leaf's place in a tree is its *generalized index*: 1 is the root, the children of ``g`` are
``2g`` and ``2g + 1``; its depth is the bit length of ``g`` minus one, and the low bits say
left or right at each level, bottom first.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

ZERO_CHUNK = bytes(32)


def sha256(data: bytes) -> bytes:
    """SHA-256, the hash of SSZ merkleization."""
    return hashlib.sha256(data).digest()


def _zero_hashes(depth: int) -> list[bytes]:
    """The roots of all-zero subtrees of height 0..depth (the padding of a partial tree)."""
    out = [ZERO_CHUNK]
    for _ in range(depth):
        out.append(sha256(out[-1] + out[-1]))
    return out


ZERO_HASHES = _zero_hashes(64)


def merkleize(chunks: Sequence[bytes], limit: int | None = None) -> bytes:
    """The root of ``chunks`` padded with zero chunks to the next power of two of ``limit``
    (or of their count): SSZ's ``merkleize``."""
    count = len(chunks) if limit is None else limit
    if len(chunks) > count:
        raise ValueError(f"{len(chunks)} chunks exceed the limit {count}")
    depth = max(count - 1, 0).bit_length()
    layer = list(chunks)
    for level in range(depth):
        if len(layer) % 2:
            layer.append(ZERO_HASHES[level])
        layer = [sha256(layer[i] + layer[i + 1]) for i in range(0, len(layer), 2)]
    return layer[0] if layer else ZERO_HASHES[depth]


def pack_bytes(data: bytes) -> list[bytes]:
    """``data`` cut into 32-byte chunks, the last one right-padded with zeros."""
    if not data:
        return []
    padded = data + bytes(-len(data) % 32)
    return [padded[i : i + 32] for i in range(0, len(padded), 32)]


def uint_chunk(value: int, size: int) -> bytes:
    """The chunk of an unsigned integer of ``size`` bytes (little-endian, zero-padded)."""
    return value.to_bytes(size, "little") + bytes(32 - size)


def bytes_root(data: bytes) -> bytes:
    """The root of a fixed-size byte vector (``Bytes32``, ``BLSPubkey``, ``ByteVector[256]``)."""
    return merkleize(pack_bytes(data))


def byte_list_root(data: bytes, limit: int) -> bytes:
    """The root of a ``ByteList[limit]``: its chunks under the limit, mixed with its length."""
    return mix_in_length(merkleize(pack_bytes(data), (limit + 31) // 32), len(data))


def mix_in_length(root: bytes, length: int) -> bytes:
    """A list's root: the root of its contents hashed with its length."""
    return sha256(root + length.to_bytes(32, "little"))


def gindex_depth(gindex: int) -> int:
    """How many siblings a branch to generalized index ``gindex`` holds."""
    return gindex.bit_length() - 1


def branch_root(leaf: bytes, branch: Sequence[bytes], gindex: int) -> bytes:
    """The root a ``branch`` from ``leaf`` at ``gindex`` leads to (bottom sibling first)."""
    node = leaf
    index = gindex
    for sibling in branch:
        node = sha256(sibling + node) if index & 1 else sha256(node + sibling)
        index >>= 1
    return node


def is_valid_branch(leaf: bytes, branch: Sequence[bytes], gindex: int, root: bytes) -> bool:
    """Whether ``branch`` proves ``leaf`` at ``gindex`` under ``root`` (a branch longer than the
    index is deep must start with zero chunks: the Electra containers' normalized branches)."""
    depth = gindex_depth(gindex)
    extra = len(branch) - depth
    if extra < 0 or any(node != ZERO_CHUNK for node in branch[:extra]):
        return False
    return branch_root(leaf, branch[extra:], gindex) == root
