"""The tx objects of recent full blocks, kept so a receipt needs no second copy.

The head tracker fetches every new block with its full transactions; a receipt built a few
blocks later rebuilds the signed txs of its block from them (guard/tx_encode.py) instead
of asking the node again. Bounded by the total number of tx objects held.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

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
