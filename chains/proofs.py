"""Building the proofs a receipt carries, from what a node answers.

The verifier (guard/) walks a Merkle-Patricia proof down from a header's root; this module
builds the tries of one block from its transactions and receipts and cuts out the path to
one transaction. It builds the trie in one pass over the sorted keys (each subtree encoded
once, hashed once), not by inserting keys one by one into a generic trie: a 500-tx block
takes a few milliseconds, and no database of nodes is kept.

Every root built here is compared with the header's root before anything is signed: a node
whose answers do not reproduce the header (a receipt field we encode differently, a tx
returned in another form than the block committed) gives :class:`ProofUnavailable`, never a
receipt that would fail verification.

Blob transactions: anvil commits a blob tx to ``transactionsRoot`` in its network form
(with the sidecar) and returns that form from ``eth_getRawTransactionByBlockHashAndIndex``;
mainnet nodes commit and return the canonical form. Either way the bytes the node returns
are the bytes the root commits to, and the proof carries them as they are (see
guard/txs.py for how the hash is taken from either form).
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from chains.errors import ChainError, RpcErrorResponse
from chains.receipt_encode import encode_receipt as encode_receipt  # re-exported
from chains.receipt_quirks import zero_byte_status_leaves
from chains.rpc import RpcClient
from guard import rlp
from guard.hashing import keccak256
from guard.headers import header_hash, header_json
from guard.mpt import encode_path
from guard.receipts import InclusionProof
from guard.tx_encode import encode_checked
from guard.txs import TransactionError


class BranchMoved(ChainError):
    """The node's chain no longer holds the blocks a decision rests on (or not yet): wait."""


class ProofUnavailable(ChainError):
    """The node's answers do not reproduce the header they should prove against."""


# -- tries ------------------------------------------------------------------------------------


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


def _data(value: Any) -> bytes:
    return bytes.fromhex(str(value)[2:])


# -- fetching ---------------------------------------------------------------------------------


def fetch_headers(
    client: RpcClient, first: int, count: int, first_hash: str, head: tuple[int, str]
) -> tuple[Mapping[str, Any], list[dict[str, str]]]:
    """Block ``first`` (JSON-RPC object, tx hashes included) and the ``count`` linked header
    objects from it up, in one batch.

    Block ``first`` must still be ``first_hash`` and ``head`` (number, hash), the block the
    decision saw as head, must still be canonical: else the chain moved (or the node lags)
    and :class:`BranchMoved` says wait. A header whose fields do not hash to the node's hash
    gives :class:`ProofUnavailable` (a field this version does not know)."""
    numbers = list(range(first, first + count))
    wanted = numbers if head[0] in numbers else [*numbers, head[0]]
    raws = client.raw_blocks(wanted)
    found = {n: b for n, b in zip(wanted, raws, strict=True) if b is not None}
    if len(found) != len(wanted):
        raise BranchMoved(f"the node has no block in {first}..{max(wanted)} yet")
    if found[head[0]].get("hash") != head[1]:
        raise BranchMoved(f"block {head[0]} is no longer {head[1]}: the chain moved, waiting")
    if found[first].get("hash") != first_hash:
        raise BranchMoved(f"block {first} is no longer {first_hash}: the chain moved, waiting")
    headers = [header_json(found[n]) for n in numbers]
    for below, above in itertools.pairwise(headers):
        if above["parentHash"] != below["hash"]:
            raise BranchMoved(f"block {above['number']} does not link: the node switched branch")
    for header in headers:
        if header_hash(header) != header["hash"]:
            raise ProofUnavailable(
                f"block {header['hash']}: its fields do not hash to its hash "
                "(a header field this version does not know?)"
            )
    return found[first], headers


@dataclass(frozen=True)
class BlockTries:
    """Both tries of one block, their roots checked against its header."""

    block_hash: str
    """The block."""
    tx_hashes: list[str]
    """Its tx hashes in order."""
    receipts: Trie
    """The receipts trie (root = receiptsRoot)."""
    transactions: Trie
    """The transactions trie (root = transactionsRoot), over the bytes the block committed."""
    tx_source: str = "local"
    """Where the signed txs came from: ``local`` (rebuilt from the block's tx objects),
    ``raw`` (``eth_getRawTransactionByHash``) or ``by_index`` (by block hash and index)."""
    unprovable: dict[int, str] = field(default_factory=dict)
    """Tx indexes whose receipt leaf the node committed in a non-canonical form, each with
    why (chains/receipt_quirks.py): no proof of those is given."""


_OVERLAP = ThreadPoolExecutor(max_workers=2, thread_name_prefix="fw-proofs")
"""Runs the receipts call beside the block call (the node serves both at once). Long-lived
threads: web3 keeps one HTTP session per thread, so the connection stays warm."""


BLOB_WEIGHT = 80
"""A blob a tx object carries (anvil returns the sidecar: 256 KB of hex) counts as this many
ordinary tx objects (about 3 KB each) against :attr:`TxObjectCache.max_txs`."""


class TxObjectCache:
    """The tx objects of recent full blocks, by block hash, bounded by their total count.

    The head tracker fetches every new block with its full transactions; fed through
    :attr:`RpcClient.block_observers`, this keeps them so that a receipt built a few blocks
    later needs no second copy from the node. A block hash names its content for good, and
    every tx rebuilt from here is still checked against its hash and the header's root."""

    def __init__(self, max_txs: int = 4000) -> None:
        self.max_txs = max_txs
        """Most tx objects held (oldest blocks go first; a blob weighs
        :data:`BLOB_WEIGHT`): about 12 MB at most."""
        self._blocks: OrderedDict[str, tuple[list[Mapping[str, Any]], int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def offer(self, block: Mapping[str, Any]) -> None:
        """Keep ``block``'s tx objects if it carries them (a block with hashes only is left)."""
        txs = block.get("transactions")
        block_hash = block.get("hash")
        if not (isinstance(txs, list) and txs and isinstance(block_hash, str)):
            return
        if not isinstance(txs[0], Mapping):
            return
        weight = len(txs) + sum(
            BLOB_WEIGHT * len(tx["blobs"])
            for tx in txs
            if isinstance(tx, Mapping) and isinstance(tx.get("blobs"), list)
        )
        if weight > self.max_txs:
            return
        with self._lock:
            if block_hash in self._blocks:
                return
            self._blocks[block_hash] = (txs, weight)
            self._held += weight
            while self._held > self.max_txs:
                self._held -= self._blocks.popitem(last=False)[1][1]

    def get(self, block_hash: str) -> Mapping[str, Any] | None:
        """A block object holding only the tx objects of ``block_hash``, if held."""
        with self._lock:
            held = self._blocks.get(block_hash)
        return None if held is None else {"hash": block_hash, "transactions": held[0]}


def _full_block(client: RpcClient, block_hash: str) -> Mapping[str, Any] | None:
    """The block with its full tx objects, or None when the node will not give it (the
    caller then asks for the raw txs)."""
    try:
        full = client.call("eth_getBlockByHash", [block_hash, True])
    except RpcErrorResponse:
        return None
    return full if isinstance(full, Mapping) else None


def fetch_receipts_and_block(
    client: RpcClient, block_hash: str
) -> tuple[list[Mapping[str, Any]], Mapping[str, Any] | None]:
    """(``eth_getBlockReceipts``, ``eth_getBlockByHash(hash, true)`` or None) of one block,
    the two calls in flight at once."""
    pending = _OVERLAP.submit(client.raw_block_receipts, block_hash)
    try:
        full = _full_block(client, block_hash)
    finally:
        answers = pending.result()
    return answers, full


def _local_leaves(full: Mapping[str, Any] | None, tx_hashes: list[str]) -> list[bytes | None]:
    """Each tx's committed bytes rebuilt from ``full``'s tx objects (None where a tx could
    not be rebuilt and checked against its hash: the caller fetches those raw)."""
    objects = None if full is None else full.get("transactions")
    if not isinstance(objects, list) or len(objects) != len(tx_hashes):
        return [None] * len(tx_hashes)
    leaves: list[bytes | None] = []
    for tx, wanted in zip(objects, tx_hashes, strict=True):
        try:
            if not isinstance(tx, Mapping) or str(tx.get("hash")).lower() != wanted.lower():
                raise TransactionError(f"the block's tx object is not {wanted}")
            leaves.append(encode_checked(tx).committed)
        except (TransactionError, rlp.RlpError):  # not rebuilt: fetched raw instead
            leaves.append(None)
    return leaves


def fetch_block_tries(
    client: RpcClient,
    block: Mapping[str, Any],
    cache: TxObjectCache | None = None,
    held_receipts: Sequence[Mapping[str, Any]] | None = None,
) -> BlockTries:
    """Both tries of ``block`` (a JSON-RPC block object with tx hashes), roots checked.

    ``eth_getBlockReceipts`` runs in the background while the signed txs are rebuilt from
    their objects (guard/tx_encode.py): those ``cache`` holds (the head tracker fetched
    them), else ``eth_getBlockByHash(hash, true)``. Each is checked against its hash; the few that cannot be (a type this version does not encode) are fetched with
    ``eth_getRawTransactionByHash``. If the leaves do not rebuild ``transactionsRoot``, the
    node's bytes decide: every raw tx by hash, batched, then
    ``eth_getRawTransactionByBlockHashAndIndex``, which answers with the committed bytes
    (slower on anvil). ``held_receipts``: the block's ``eth_getBlockReceipts`` answer when
    the engine already fetched it (checked the same way, never fetched again)."""
    block_hash = str(block["hash"])
    tx_hashes = [str(t if isinstance(t, str) else t["hash"]) for t in block["transactions"]]
    if not tx_hashes:
        raise BranchMoved(f"block {block_hash} holds no transaction")
    root = str(block["transactionsRoot"])
    if held_receipts is not None:  # the engine fetched them already: no second call
        pending: Future[Sequence[Mapping[str, Any]]] = Future()
        pending.set_result(held_receipts)
    else:
        pending = _OVERLAP.submit(client.raw_block_receipts, block_hash)
    try:  # the node serves the receipts while the txs are rebuilt here
        full = None if cache is None else cache.get(block_hash)
        if full is None:
            full = _full_block(client, block_hash)
        leaves = _local_leaves(full, tx_hashes)
        transactions = _trie_if_root(leaves, root)
    finally:
        answers = pending.result()
    if [str(r["transactionHash"]) for r in answers] != tx_hashes:
        raise BranchMoved(f"the receipts of {block_hash} do not match its transactions")
    receipts = Trie([encode_receipt(r) for r in answers])
    unprovable: dict[int, str] = {}
    if "0x" + receipts.root.hex() != block["receiptsRoot"]:
        # Ganache commits failed statuses as 0x00: its other receipts are still provable.
        leaves_00, unprovable = zero_byte_status_leaves(answers)
        receipts = Trie(leaves_00)
        if not unprovable or "0x" + receipts.root.hex() != block["receiptsRoot"]:
            raise ProofUnavailable(
                f"block {block_hash}: the node's receipts do not rebuild receiptsRoot"
            )
    source = "local"
    missing = [i for i, leaf in enumerate(leaves) if leaf is None]
    if missing:  # a few txs not rebuilt (a type this version does not encode): fetch those
        source = "raw"
        for i, raw in zip(
            missing, client.raw_transactions([tx_hashes[i] for i in missing]), strict=True
        ):
            leaves[i] = None if raw is None else _data(raw)
        transactions = _trie_if_root(leaves, root)
    elif transactions is None:  # every tx rebuilt, but not the root: the node's bytes decide
        source = "raw"
        transactions = _trie_if_root(
            [None if r is None else _data(r) for r in client.raw_transactions(tx_hashes)], root
        )
    if transactions is None:
        source = "by_index"
        by_index = client.raw_block_transactions(block_hash, len(tx_hashes))
        transactions = _trie_if_root([_data(r) for r in by_index], root)
        if transactions is None:
            raise ProofUnavailable(
                f"block {block_hash}: the node's raw txs do not rebuild transactionsRoot"
            )
    return BlockTries(block_hash, tx_hashes, receipts, transactions, source, unprovable)


def _trie_if_root(leaves: Sequence[bytes | None], root: str) -> Trie | None:
    """The trie of ``leaves`` if every one is known and they rebuild ``root``, else None."""
    known = [leaf for leaf in leaves if leaf is not None]
    if len(known) != len(leaves):
        return None
    trie = Trie(known)
    return trie if "0x" + trie.root.hex() == root else None


def inclusion_proof(
    tries: BlockTries, headers: list[dict[str, str]], tx_index: int
) -> InclusionProof:
    """The proof of the ``tx_index``-th tx of the block ``headers[0]``."""
    if headers[0]["hash"] != tries.block_hash:
        raise ValueError(f"the tries are of block {tries.block_hash}, not {headers[0]['hash']}")
    if tx_index in tries.unprovable:
        raise ProofUnavailable(f"block {tries.block_hash}: {tries.unprovable[tx_index]}")
    return InclusionProof(
        headers=headers,
        tx_index=tx_index,
        receipt_proof=["0x" + n.hex() for n in tries.receipts.proof(tx_index)],
        transaction_proof=["0x" + n.hex() for n in tries.transactions.proof(tx_index)],
    )


def head_at(
    client: RpcClient, deadline_ms: int
) -> tuple[dict[str, str] | None, dict[str, str] | None]:
    """(the last block with ``timestamp * 1000 <= deadline_ms``, its child if one exists).

    Gallops down from the node's latest block, then bisects: a few calls when the deadline
    is recent, which it is when a timeout has just been decided."""
    latest = client.raw_blocks(["latest"])[0]
    if latest is None:
        raise BranchMoved("the node has no latest block")
    top = int(str(latest["number"]), 16)

    def stamp(n: int) -> int:
        block = client.raw_blocks([n])[0]
        if block is None:
            raise BranchMoved(f"the node lost block {n}")
        return int(str(block["timestamp"]), 16) * 1000

    if int(str(latest["timestamp"]), 16) * 1000 <= deadline_ms:
        low, high = top, top + 1
    else:
        high, low, step = top, top - 1, 1
        while True:
            if low < 0:
                return None, None
            if stamp(low) <= deadline_ms:
                break
            high = low
            if low == 0:
                return None, None
            step *= 2
            low = max(0, top - step)
        while high - low > 1:  # stamp(low) <= deadline < stamp(high)
            middle = (low + high) // 2
            if stamp(middle) <= deadline_ms:
                low = middle
            else:
                high = middle
    pair = client.raw_blocks([low, high] if high <= top else [low])
    headers = [header_json(b) for b in pair if b is not None]
    if len(headers) == 2 and headers[1]["parentHash"] != headers[0]["hash"]:
        raise BranchMoved(f"block {high} does not link to {low}: the node switched branch")
    for header in headers:
        if header_hash(header) != header["hash"]:
            raise ProofUnavailable(f"block {header['number']}: fields do not hash to its hash")
    return headers[0], (headers[1] if len(headers) == 2 else None)
