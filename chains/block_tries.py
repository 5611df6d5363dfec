"""Both tries of one block, rebuilt from what the node answers, roots checked.

A receipt proves a tx by the paths from ``transactionsRoot`` and ``receiptsRoot`` down to
its leaves; :func:`fetch_block_tries` rebuilds both tries of its block and compares each
root with the header's before anything is signed. A node whose answers do not reproduce
the header (a receipt field we encode differently, a tx returned in another form than the
block committed) gives :class:`ProofUnavailable`, never a receipt that would fail
verification.

Blob transactions: anvil commits a blob tx to ``transactionsRoot`` in its network form
(with the sidecar) and returns that form from ``eth_getRawTransactionByBlockHashAndIndex``;
mainnet nodes commit and return the canonical form. Either way the bytes the node returns
are the bytes the root commits to, and the proof carries them as they are (see
guard/txs.py for how the hash is taken from either form).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from chains.errors import BranchMoved, ProofUnavailable, RpcErrorResponse
from chains.receipt_encode import encode_receipt
from chains.receipt_quirks import zero_byte_status_leaves
from chains.rpc import RpcClient
from chains.trie import Trie
from chains.tx_cache import TxObjectCache
from guard import rlp
from guard.tx_encode import encode_checked
from guard.txs import TransactionError


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


def _data(value: Any) -> bytes:
    return bytes.fromhex(str(value)[2:])


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
    them), else ``eth_getBlockByHash(hash, true)``. Each is checked against its hash; the
    few that cannot be (a type this version does not encode) are fetched with
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
    receipts, unprovable = _receipts_trie(answers, block_hash, str(block["receiptsRoot"]))
    transactions, source = _transactions_trie(
        client, block_hash, tx_hashes, leaves, transactions, root
    )
    return BlockTries(block_hash, tx_hashes, receipts, transactions, source, unprovable)


def _receipts_trie(
    answers: Sequence[Mapping[str, Any]], block_hash: str, receipts_root: str
) -> tuple[Trie, dict[int, str]]:
    """The receipts trie of ``answers`` if it rebuilds ``receipts_root``, with the indexes
    left unprovable (Ganache commits failed statuses as 0x00: its other receipts are still
    provable); else :class:`ProofUnavailable`."""
    receipts = Trie([encode_receipt(r) for r in answers])
    unprovable: dict[int, str] = {}
    if "0x" + receipts.root.hex() != receipts_root:
        leaves_00, unprovable = zero_byte_status_leaves(answers)
        receipts = Trie(leaves_00)
        if not unprovable or "0x" + receipts.root.hex() != receipts_root:
            raise ProofUnavailable(
                f"block {block_hash}: the node's receipts do not rebuild receiptsRoot"
            )
    return receipts, unprovable


def _transactions_trie(
    client: RpcClient,
    block_hash: str,
    tx_hashes: list[str],
    leaves: list[bytes | None],
    rebuilt: Trie | None,
    root: str,
) -> tuple[Trie, str]:
    """The transactions trie and where its leaves came from (``local``, ``raw``,
    ``by_index``): ``rebuilt`` when the local leaves made it, else the node's bytes."""
    transactions = rebuilt
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
    return transactions, source


def _trie_if_root(leaves: Sequence[bytes | None], root: str) -> Trie | None:
    """The trie of ``leaves`` if every one is known and they rebuild ``root``, else None."""
    known = [leaf for leaf in leaves if leaf is not None]
    if len(known) != len(leaves):
        return None
    trie = Trie(known)
    return trie if "0x" + trie.root.hex() == root else None
