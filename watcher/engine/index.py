"""The in-memory index of one chain's watched settlements.

Memory holds only lookups (tx hash → settlements, (sender, nonce) → settlements); the store
is the truth, and a restart rebuilds the index from it (``Store.watch_entries``). One tx
hash may be watched by several settlements (one per API caller that registered it): a
block's tx is matched once and concerns all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from watcher.store.records import SettlementRecord, WatchEntry

K = TypeVar("K")


@dataclass
class WatchIndex:
    """Lookups over the watched settlements of one chain."""

    by_id: dict[str, WatchEntry] = field(default_factory=dict)
    by_hash: dict[str, set[str]] = field(default_factory=dict)
    by_sender_nonce: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    max_seq: int = 0

    def add(self, entry: WatchEntry) -> None:
        """Index ``entry`` (replacing what was indexed for its settlement)."""
        self.remove(entry.settlement_id)
        self.by_id[entry.settlement_id] = entry
        self.by_hash.setdefault(entry.tx_hash, set()).add(entry.settlement_id)
        if entry.sender is not None and entry.nonce is not None:
            self.by_sender_nonce.setdefault((entry.sender, entry.nonce), set()).add(
                entry.settlement_id
            )
        self.max_seq = max(self.max_seq, entry.seq)

    def remove(self, settlement_id: str) -> None:
        """Forget one settlement (no longer watched); the others of its hash stay."""
        entry = self.by_id.pop(settlement_id, None)
        if entry is None:
            return
        _discard(self.by_hash, entry.tx_hash, settlement_id)
        if entry.sender is not None and entry.nonce is not None:
            _discard(self.by_sender_nonce, (entry.sender, entry.nonce), settlement_id)

    def ids_of(self, tx_hash: str) -> set[str]:
        """The watched settlements of ``tx_hash`` (empty when none)."""
        return self.by_hash.get(tx_hash, set())

    def update(self, rec: SettlementRecord) -> None:
        """Follow a stored change: index it while watched, drop it otherwise."""
        if rec.watching:
            self.add(
                WatchEntry(
                    rec.seq, rec.settlement_id, rec.tx_hash, rec.sender, rec.nonce, rec.block_number
                )
            )
        else:
            self.remove(rec.settlement_id)


def _discard(lookup: dict[K, set[str]], key: K, settlement_id: str) -> None:
    """Drop ``settlement_id`` from ``lookup[key]``, and the key once its set is empty."""
    ids = lookup.get(key)
    if ids is not None:
        ids.discard(settlement_id)
        if not ids:
            del lookup[key]
