"""A watched tx's inclusion proof, cut and checked while it waits for depth N.

A finality receipt proves the tx in its block B with two trie proofs (receipt and
transaction) against B's roots. Both depend on block B alone, and the tx waits N blocks (6 s
at N = 12 and a block every 0.5 s) after inclusion before its receipt is due. So as soon as
the engine has fetched B's receipts for its watched txs (and built and checked B's tries:
chains/block_checks.py), this cuts each watched tx's proofs and checks them with the offline
verifier's own check (:func:`guard.verify_chain.check_tx_proofs`, remembered by content).
At depth N the builder puts the prepared proofs in the receipt as they are, and the receipt's
self-check finds their content checked already; what is left at finality is what depends on
the final head and the signature.

In a catch-up a poll runs through hundreds of blocks before the receipts thread looks, and
the facts keep a block's tries for the last 32 blocks only: so the proofs are also cut the
moment the engine's check offers a block's tries (:meth:`ProofsAhead.on_tries`), and kept
per watched tx (:data:`PROOFS_HELD`), not per block, until their receipt takes them.

Everything is keyed by block hash: a reorg that moves the tx to another block finds nothing
prepared for the new block until its own receipts are fetched, so a receipt never carries a
proof of a block the decision does not name. The proofs are the bytes the tries give at
finality too (tests/integration/test_receipts_ahead.py builds both and compares).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from chains.block_facts import BlockFacts, header_from_compact
from chains.block_tries import BlockTries
from guard.errors import ReceiptInvalid
from guard.verify_chain import check_tx_proofs

log = logging.getLogger("finality.receipts")

PROOFS_HELD = 4096
"""Watched txs whose prepared proofs are kept at most, oldest blocks' first to go (a proof
is dropped when its receipt takes it; this bounds what blocks reorged away or never final
leave behind, whatever the length of a catch-up: a few KB a tx)."""

BLOCKS_LOOKED_AT = 16
"""The newest blocks with watched txs looked at on each call: a tx registered after its
block was seen (its receipts already held) is prepared on the next call."""


@dataclass(frozen=True)
class PreparedProof:
    """A watched tx's two trie proofs in its block, checked against the block's roots."""

    tx_index: int
    """Position of the tx in the block."""
    receipt_proof: tuple[str, ...]
    """Nodes (0x hex RLP) from ``receiptsRoot`` to its receipt."""
    transaction_proof: tuple[str, ...]
    """Nodes from ``transactionsRoot`` to the signed tx."""

    @property
    def proofs(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(receipt proof, transaction proof), in :class:`guard.receipts.InclusionProof`'s
        order."""
        return self.receipt_proof, self.transaction_proof


class ProofsAhead:
    """The prepared proofs of one chain's watched txs, by block hash then tx hash."""

    def __init__(self, facts: BlockFacts) -> None:
        self.facts = facts
        """Where the engine's watched txs per block, and the blocks' headers, are read."""
        self._blocks: OrderedDict[str, dict[str, PreparedProof | None]] = OrderedDict()
        """Per block: each watched tx's proof, None when it cannot be proven ahead."""
        self._held = 0
        """Entries in ``_blocks`` (txs), kept at most :data:`PROOFS_HELD`."""
        self._lock = threading.Lock()
        """The engine's thread prepares (:meth:`on_tries`) while the receipts thread takes."""
        facts.tries_observers.append(self.on_tries)

    def on_tries(self, tries: BlockTries) -> None:
        """Prepare the watched txs of the block whose checked tries the engine just offered."""
        tx_hashes = self.facts.watched_in(tries.block_hash)
        if tx_hashes:
            self._prepare(tries.block_hash, tx_hashes, lambda _h: tries)

    def prepare(self, tries_of: Callable[[str], BlockTries | None]) -> int:
        """Cut and check the proofs of the watched txs not prepared yet, in the newest blocks
        whose tries ``tries_of`` gives (a block without them waits: its receipts build them
        at finality as before); returns how many were prepared."""
        return sum(
            self._prepare(block_hash, tx_hashes, tries_of)
            for block_hash, tx_hashes in self.facts.watched(BLOCKS_LOOKED_AT)
        )

    def _prepare(
        self, block_hash: str, tx_hashes: list[str], tries_of: Callable[[str], BlockTries | None]
    ) -> int:
        """Prepare those of ``tx_hashes`` in ``block_hash`` not held yet; returns how many."""
        with self._lock:
            held = self._blocks.get(block_hash)
            todo = [h for h in tx_hashes if held is None or h not in held]
            if not todo:
                return 0
            tries = tries_of(block_hash)
            compact = self.facts.header(block_hash)
            if tries is None or compact is None:
                return 0
            if held is None:
                held = self._blocks[block_hash] = {}
            before = len(held)
            prepared = _prepare_block(held, tries, header_from_compact(compact), todo)
            self._held += len(held) - before
            while self._held > PROOFS_HELD and len(self._blocks) > 1:
                self._held -= len(self._blocks.popitem(last=False)[1])
            return prepared

    def take(self, block_hash: str, tx_hash: str) -> PreparedProof | None:
        """The prepared proof of ``tx_hash`` in ``block_hash`` (None if there is none), given
        up: its receipt is being built (a retry cuts it from the tries again)."""
        with self._lock:
            held = self._blocks.get(block_hash)
            if held is None:
                return None
            proof = held.get(tx_hash)
            if proof is not None:
                held[tx_hash] = None  # taken: not prepared again while the block is looked at
            return proof


def _prepare_block(
    held: dict[str, PreparedProof | None],
    tries: BlockTries,
    header: dict[str, str],
    tx_hashes: list[str],
) -> int:
    """Prepare ``tx_hashes`` of the block of ``tries`` and ``header`` into ``held``."""
    if header["hash"] != tries.block_hash:
        return 0
    number = int(header["number"], 16)
    index_of = {h: i for i, h in enumerate(tries.tx_hashes)}
    prepared = 0
    for tx_hash in tx_hashes:
        index = index_of.get(tx_hash)
        held[tx_hash] = None
        if index is None or index in tries.unprovable:
            continue
        receipt_proof = tuple("0x" + n.hex() for n in tries.receipts.proof(index))
        transaction_proof = tuple("0x" + n.hex() for n in tries.transactions.proof(index))
        proofs = {
            "receipt_proof": list(receipt_proof),
            "transaction_proof": list(transaction_proof),
        }
        try:
            check_tx_proofs(header, number, index, proofs)
        except ReceiptInvalid as exc:  # the tries were checked: never expected
            log.warning("block %s: tx %s not proven ahead: %s", header["hash"], tx_hash, exc)
            continue
        held[tx_hash] = PreparedProof(index, receipt_proof, transaction_proof)
        prepared += 1
    return prepared
