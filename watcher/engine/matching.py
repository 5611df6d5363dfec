"""Which watched settlements a block concerns: a pure function of (block txs, index).

A tx matches a settlement by its hash; another tx with a watched (sender, nonce) replaces
it. After a reorg, settlements anchored on the replaced blocks are looked for too, even if
they are no longer watched (a confirmed one is not): a tx re-included in the branch's first
block, or another tx of the same sender and nonce there, must not be missed. Nothing here
reads the store or the node: the caller passes what it read.

One tx hash may belong to several settlements (one per caller that registered it): the tx
is matched once and every settlement of its hash gets an entry, in the order of their ids,
so one receipt serves them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from chains.models import BlockTx
from watcher.engine.index import WatchIndex

Anchored = tuple[str, str, str | None, int | None]
"""(tx hash, settlement id, sender, nonce) of a settlement anchored above a reorg's ancestor."""


@dataclass(frozen=True)
class Reanchor:
    """Settlements a reorg un-anchored, to look for in the new branch's first block."""

    by_hash: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """tx hash → settlement ids."""
    by_sender_nonce: Mapping[tuple[str, int], Sequence[tuple[str, str]]] = field(
        default_factory=dict
    )
    """(sender, nonce) → [(settlement id, tx hash)] of those the watch index lacks."""


def reanchor_of(anchored: Iterable[Anchored], index: WatchIndex) -> Reanchor:
    """The :class:`Reanchor` of the settlements ``anchored`` above a reorg's ancestor."""
    by_hash: dict[str, list[str]] = {}
    by_nonce: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for tx_hash, settlement_id, sender, nonce in anchored:
        by_hash.setdefault(tx_hash, []).append(settlement_id)
        if sender is not None and nonce is not None and settlement_id not in index.by_id:
            by_nonce.setdefault((sender, nonce), []).append((settlement_id, tx_hash))
    return Reanchor(by_hash, by_nonce)


@dataclass(frozen=True)
class BlockMatches:
    """What one block holds for the watched settlements."""

    matched: list[tuple[str, BlockTx]]
    """(settlement id, its tx) for each settlement of each watched tx in the block."""
    replacing: list[tuple[str, BlockTx]]
    """(settlement id, the other tx) for each tx with a watched sender and nonce."""

    @property
    def ids(self) -> set[str]:
        """Every settlement the block concerns."""
        return {sid for sid, _ in self.matched + self.replacing}


NO_REANCHOR = Reanchor()


def match_block(
    txs: Sequence[BlockTx], index: WatchIndex, reanchor: Reanchor = NO_REANCHOR
) -> BlockMatches:
    """The watched txs in ``txs`` and the same-nonce txs that replace watched ones."""
    matched: list[tuple[str, BlockTx]] = []
    replacing: list[tuple[str, BlockTx]] = []
    by_hash, by_nonce = index.by_hash, index.by_sender_nonce
    for tx in txs:
        watched = by_hash.get(tx.hash)
        anchored = reanchor.by_hash.get(tx.hash) if reanchor.by_hash else None
        if watched or anchored:
            ids = set(watched or ()).union(anchored or ()) if anchored else watched or ()
            matched.extend((sid, tx) for sid in (sorted(ids) if len(ids) > 1 else ids))
        key = (tx.sender, tx.nonce)
        others = by_nonce.get(key)
        if others:
            for other in sorted(others) if len(others) > 1 else others:
                if index.by_id[other].tx_hash != tx.hash:
                    replacing.append((other, tx))
        if reanchor.by_sender_nonce:
            for other, other_hash in reanchor.by_sender_nonce.get(key, ()):
                if other_hash != tx.hash:
                    replacing.append((other, tx))
    return BlockMatches(matched, replacing)
