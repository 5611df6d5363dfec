"""The in-memory index of one chain's standing address watches: address → subscriptions.

Like the payment index it holds lookups only; the store is the truth. New addresses are
read by insertion order (one indexed query a poll); the matched subscriptions (a small
table) are read again each poll, so a deleted subscription stops matching once its last
seen deposit is final, while its addresses stay indexed (skipped, not removed: cheaper than
a rebuild). Until then its transfers are still matched, but only to find its known
deposits again after a reorg: it gets no new deposit.
"""

from __future__ import annotations

import json
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from guard.payment import NATIVE
from watcher.store.deposit_records import AddressWatch, SubscriptionRecord


@dataclass(frozen=True)
class WatchedBy:
    """One active subscription watching an address, as a match needs it."""

    subscription_id: str
    """The subscription."""
    assets: frozenset[str]
    """What it watches: ``native`` and/or token contracts."""
    after_block: int | None
    """Transfers count in blocks above this one."""


Watch = tuple[str, int | None]
"""One subscription's watch of an address: (subscription id, ``after_block``)."""


@dataclass
class SubscriptionIndex:
    """Lookups over the watched addresses of one chain.

    An address's watches are a tuple of tuples of strings and ints, not objects: the
    collector untracks such tuples once it has seen them, so 100,000 watched addresses
    cost it one dict to look through instead of 200,000 objects (a full collection over
    them took 150 ms of a block's poll, 700 ms of the poll that indexed them)."""

    by_address: dict[str, tuple[Watch, ...]] = field(default_factory=dict)
    """Address → its watches (one per subscription), oldest first."""
    subscriptions: dict[str, frozenset[str]] = field(default_factory=dict)
    """Matched subscription id → its assets."""
    records: dict[str, SubscriptionRecord] = field(default_factory=dict)
    """Matched subscription id → its row (owner, confirmations, commit_url of its deposits;
    ``active`` false: deleted, its known deposits only)."""
    max_seq: int = 0

    _ids: dict[str, str] = field(default_factory=dict)
    """Each subscription id once (100,000 rows read the same id as 100,000 strings)."""

    def add(self, watch: AddressWatch) -> None:
        """Index one watched address."""
        sid = self._ids.setdefault(watch.subscription_id, watch.subscription_id)
        had = self.by_address.get(watch.address, ())
        self.by_address[watch.address] = (*had, (sid, watch.after_block))
        self.max_seq = max(self.max_seq, watch.seq)

    def set_active(self, active: dict[str, SubscriptionRecord]) -> None:
        """The subscriptions matched now (read each poll): the active ones, and deleted ones
        whose seen deposits are not final yet (a reorg may include them again)."""
        self.records = dict(active)
        self.subscriptions = {sid: frozenset(json.loads(sub.assets)) for sid, sub in active.items()}

    def watching(self, address: str, asset: str) -> list[WatchedBy]:
        """The matched subscriptions watching ``asset`` to ``address``."""
        out: list[WatchedBy] = []
        for sid, after_block in self.by_address.get(address, ()):
            assets = self.subscriptions.get(sid)
            if assets is not None and asset in assets:
                out.append(WatchedBy(sid, assets, after_block))
        return out

    def watched(self, address: str, asset: str) -> bool:
        """Whether a matched subscription watches ``asset`` to ``address``."""
        for sid, _after in self.by_address.get(address, ()):
            assets = self.subscriptions.get(sid)
            if assets is not None and asset in assets:
                return True
        return False

    @property
    def active(self) -> bool:
        """Whether anything is watched."""
        return bool(self.subscriptions) and bool(self.by_address)

    def tokens(self) -> set[str]:
        """Every token contract an active subscription watches (the logs query's list)."""
        return {a for assets in self.subscriptions.values() for a in assets if a != NATIVE}

    def addresses(self) -> AbstractSet[str]:
        """Every indexed address (topic2 of the logs query; above the node's filter size
        the logs are filtered locally: still one call): a view of the index's keys, not a
        copy (100,000 of them took 16 ms a poll to gather again, and 4 MB to keep)."""
        return self.by_address.keys()
