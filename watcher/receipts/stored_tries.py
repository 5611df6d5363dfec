"""A block's tries the receipt builder has not built: from the leaves a receipt stored
(watcher/store/leaves_store.py), else from the node.

A block's later receipts, after a restart too, prove from stored leaves instead of asking
the node; they are used only while they rebuild the header's roots.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chains.proofs import BlockTries, ProofUnavailable, Trie, TxObjectCache, fetch_block_tries
from chains.rpc import RpcClient
from watcher.store.leaves_store import LeavesStore


def stored_tries(leaves: LeavesStore, chain: str, header: Mapping[str, Any]) -> BlockTries | None:
    """The block's tries from its stored leaves, if a receipt was built from it before and
    they still rebuild the header's roots (else None: the node is asked)."""
    held = leaves.get(chain, str(header["hash"]))
    if held is None:
        return None
    transactions, receipts = Trie(held.tx_leaves), Trie(held.receipt_leaves)
    if "0x" + transactions.root.hex() != header["transactionsRoot"]:
        return None
    if "0x" + receipts.root.hex() != header["receiptsRoot"]:
        return None
    return BlockTries(str(header["hash"]), held.tx_hashes, receipts, transactions, "stored")


def fetched_tries(
    client: RpcClient,
    block: Mapping[str, Any],
    cache: TxObjectCache,
    receipts: Sequence[Mapping[str, Any]] | None,
) -> BlockTries:
    """Both tries of ``block`` from the node (the engine had not built them; ``receipts``:
    its receipts when still held, not asked again): answers that do not rebuild the header's
    roots mark the endpoint inconsistent, as the engine does, so health says why the receipt
    waits."""
    try:
        return fetch_block_tries(client, block, cache, receipts)
    except ProofUnavailable as exc:
        raise client.distrust(client.answering_endpoint(), str(exc)) from exc
