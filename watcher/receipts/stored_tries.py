"""A block's tries rebuilt from the leaves a receipt stored (watcher/store/leaves_store.py).

A block's later receipts, after a restart too, prove from them instead of asking the node;
they are used only while they rebuild the header's roots.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chains.proofs import BlockTries, Trie
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
