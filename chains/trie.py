"""The Merkle-Patricia trie of a block's transactions or receipts, built in one pass.

A block commits to its transactions and receipts by the root of a trie keyed by
rlp(position) (:func:`index_key`). The verifier (guard/mpt.py) walks a proof down from that
root; this module builds the trie and cuts the proofs out. It builds in one pass over the
sorted keys (each subtree encoded once, hashed once), not by inserting keys one by one
into a generic trie: a 500-tx block takes a few milliseconds, and no database of nodes is
kept. Checked against the official TrieTests (tests/unit/test_official_vectors_rlp_trie.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from guard import rlp
from guard.hashing import keccak256
from guard.mpt import encode_path


def index_key(index: int) -> bytes:
    """The trie key of the ``index``-th tx or receipt of a block: rlp(index)."""
    return rlp.encode(rlp.encode_uint(index))


def _nibbles(key: bytes) -> bytes:
    return bytes(n for byte in key for n in (byte >> 4, byte & 0x0F))


def _reference(node: rlp.Item, encoded: bytes) -> rlp.Item:
    """How a parent refers to a child: its hash, or the node itself when under 32 bytes."""
    return node if len(encoded) < 32 else keccak256(encoded)


@dataclass
class _Node:
    """One built trie node: its encoding, and how to walk below it."""

    encoded: bytes
    """RLP of the node."""
    item: rlp.Item
    """The node as an RLP item (what a parent embeds when it is under 32 bytes)."""
    path: bytes = b""
    """Nibbles an extension or a leaf consumes."""
    leaf: bool = False
    """True for a leaf."""
    children: dict[int, _Node] = field(default_factory=dict)
    """A branch's children by nibble; an extension's single child under 0."""


def _build(items: Sequence[tuple[bytes, bytes]], depth: int) -> _Node:
    """The subtree of ``items`` (sorted, distinct nibble keys, all sharing their first
    ``depth`` nibbles) below ``depth``.

    A key that is a prefix of another ends at a branch: its value is the branch's 17th item.
    Sorted, such a key comes first among those it prefixes."""
    if len(items) == 1:
        key, value = items[0]
        item: list[rlp.Item] = [encode_path(key[depth:], leaf=True), value]
        return _Node(rlp.encode(item), item, path=key[depth:], leaf=True)
    first, last = items[0][0], items[-1][0]
    room = min(len(first), len(last)) - depth
    shared = 0
    while shared < room and first[depth + shared] == last[depth + shared]:
        shared += 1  # sorted: first and last bound all
    if shared:
        below = _build(items, depth + shared)
        item = [
            encode_path(first[depth : depth + shared], leaf=False),
            _reference(below.item, below.encoded),
        ]
        return _Node(
            rlp.encode(item), item, path=first[depth : depth + shared], children={0: below}
        )
    branch: list[rlp.Item] = [b""] * 17
    rest = items
    if len(first) == depth:  # a key that ends here, a prefix of the others
        branch[16], rest = items[0][1], items[1:]
    children: dict[int, _Node] = {}
    for nibble, group in itertools.groupby(rest, key=lambda kv: kv[0][depth]):
        child = _build(list(group), depth + 1)
        children[nibble] = child
        branch[nibble] = _reference(child.item, child.encoded)
    return _Node(rlp.encode(branch), branch, children=children)


EMPTY_TRIE_ROOT = keccak256(rlp.encode(b""))
"""Root hash of a trie without values (keccak256 of rlp(b""))."""


class Trie:
    """The trie of a block's txs or receipts, keyed by rlp(position), built once in one pass
    over the sorted keys (each subtree encoded and hashed once); proofs are then walks.

    :meth:`of_items` builds one over any keys (the official trie tests use it): a key may be
    a prefix of another (its value then sits in a branch). Block tries never have such keys
    (no rlp(i) is a prefix of another rlp(j)) nor an empty value."""

    def __init__(self, values: Sequence[bytes]) -> None:
        if not values:
            raise ValueError("a block's trie proves something only when it holds a value")
        self._init({index_key(i): v for i, v in enumerate(values)})
        self.size = len(values)
        """How many values (the block's txs or receipts) it holds."""
        self.values: list[bytes] = list(values)
        """The leaves in order (stored so a later receipt of the block rebuilds the trie
        without the node: watcher/store/leaves_store.py)."""

    @classmethod
    def of_items(cls, items: Mapping[bytes, bytes]) -> Trie:
        """The trie holding ``items`` (key -> value). An empty value is no value (Ethereum
        tries delete a key set to b""); with none left, the root is :data:`EMPTY_TRIE_ROOT`
        and :meth:`prove` has nothing to show."""
        trie = cls.__new__(cls)
        trie._init({k: v for k, v in items.items() if v})
        trie.size = len(trie._keys)
        return trie

    def _init(self, items: Mapping[bytes, bytes]) -> None:
        self._keys = set(items)
        if not items:
            self._root = _Node(rlp.encode(b""), b"")
        else:
            self._root = _build(sorted((_nibbles(k), v) for k, v in items.items()), 0)
        self.root = keccak256(self._root.encoded)
        """The root hash (the header's transactionsRoot or receiptsRoot)."""

    def proof(self, index: int) -> list[bytes]:
        """The proof of the ``index``-th value of a block's trie (see :meth:`prove`)."""
        if not 0 <= index < self.size:
            raise IndexError(f"no value {index} in a trie of {self.size}")
        return self.prove(index_key(index))

    def prove(self, key: bytes) -> list[bytes]:
        """The nodes from the root to the value at ``key``: the root, then every node on the
        path that its parent references by hash (embedded ones travel inside it)."""
        if key not in self._keys:
            raise KeyError(f"no value at key 0x{key.hex()}")
        path = _nibbles(key)
        node, pos, out = self._root, 0, [self._root.encoded]
        while not node.leaf:
            if node.path:  # extension
                pos += len(node.path)
                node = node.children[0]
            elif pos == len(path):  # the key ends at this branch: its value is here
                break
            else:
                node = node.children[path[pos]]
                pos += 1
            if len(node.encoded) >= 32:
                out.append(node.encoded)
        return out


def trie_proof(values: Sequence[bytes], index: int) -> tuple[bytes, list[bytes]]:
    """(root hash, proof of the ``index``-th value) of the trie keyed by rlp(position)."""
    trie = Trie(values)
    return trie.root, trie.proof(index)
