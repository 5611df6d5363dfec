"""The in-memory index of one chain's watched payments: recipient → payments.

Like the tx index (:mod:`watcher.engine.index`) it holds lookups only; the store is the
truth, and a restart rebuilds it (``Store.payment_watches``). Native payments are found by
the recipient of each top-level tx of a block; token payments by (token, recipient) of each
``Transfer`` log, and the pairs are what the poll's one ``eth_getLogs`` asks for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from guard.payment import NATIVE
from watcher.store.payment_records import PaymentWatch


@dataclass
class PaymentIndex:
    """Lookups over the watched payments of one chain."""

    by_id: dict[str, PaymentWatch] = field(default_factory=dict)
    by_key: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    """(asset, recipient) → settlement ids; asset is ``native`` or the token contract."""
    tokens: dict[str, int] = field(default_factory=dict)
    """Token contract → how many watched payments of it."""
    max_seq: int = 0

    def add(self, watch: PaymentWatch) -> None:
        """Index ``watch`` (replacing what was indexed for its settlement)."""
        self.remove(watch.settlement_id)
        self.by_id[watch.settlement_id] = watch
        self.by_key.setdefault((watch.asset, watch.to_address), set()).add(watch.settlement_id)
        if watch.asset != NATIVE:
            self.tokens[watch.asset] = self.tokens.get(watch.asset, 0) + 1
        self.max_seq = max(self.max_seq, watch.seq)

    def remove(self, settlement_id: str) -> None:
        """Forget one payment (no longer watched)."""
        watch = self.by_id.pop(settlement_id, None)
        if watch is None:
            return
        key = (watch.asset, watch.to_address)
        ids = self.by_key.get(key)
        if ids is not None:
            ids.discard(settlement_id)
            if not ids:
                del self.by_key[key]
        if watch.asset != NATIVE:
            left = self.tokens.get(watch.asset, 1) - 1
            if left > 0:
                self.tokens[watch.asset] = left
            else:
                self.tokens.pop(watch.asset, None)

    def watching(self, asset: str, to: str) -> list[PaymentWatch]:
        """The payments of ``asset`` to ``to``, oldest registration first."""
        ids = self.by_key.get((asset, to), ())
        return sorted((self.by_id[i] for i in ids), key=lambda w: w.seq)

    def token_recipients(self) -> set[str]:
        """Every recipient of a watched token payment (topic2 of the logs query)."""
        return {to for (asset, to) in self.by_key if asset != NATIVE}

    def has_native(self) -> bool:
        """Whether any native payment is watched."""
        return any(asset == NATIVE for asset, _ in self.by_key)
