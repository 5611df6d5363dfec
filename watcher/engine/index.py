"""The in-memory index of one chain's watched settlements.

Memory holds only lookups (tx hash → settlement, (sender, nonce) → settlements); the store
is the truth, and a restart rebuilds the index from it (``Store.watch_entries``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from watcher.store.records import SettlementRecord, WatchEntry


@dataclass
class WatchIndex:
    """Lookups over the watched settlements of one chain."""

    by_id: dict[str, WatchEntry] = field(default_factory=dict)
    by_hash: dict[str, str] = field(default_factory=dict)
    by_sender_nonce: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    max_seq: int = 0

    def add(self, entry: WatchEntry) -> None:
        """Index ``entry`` (replacing what was indexed for its settlement)."""
        self.remove(entry.settlement_id)
        self.by_id[entry.settlement_id] = entry
        self.by_hash[entry.tx_hash] = entry.settlement_id
        if entry.sender is not None and entry.nonce is not None:
            self.by_sender_nonce.setdefault((entry.sender, entry.nonce), set()).add(
                entry.settlement_id
            )
        self.max_seq = max(self.max_seq, entry.seq)

    def remove(self, settlement_id: str) -> None:
        """Forget one settlement (no longer watched)."""
        entry = self.by_id.pop(settlement_id, None)
        if entry is None:
            return
        self.by_hash.pop(entry.tx_hash, None)
        if entry.sender is not None and entry.nonce is not None:
            key = (entry.sender, entry.nonce)
            ids = self.by_sender_nonce.get(key)
            if ids is not None:
                ids.discard(settlement_id)
                if not ids:
                    del self.by_sender_nonce[key]

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
