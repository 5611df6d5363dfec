"""What one chain's engine remembers between blocks, and when that memory may move.

The store is the truth; memory holds only what makes a poll cheap: the header window, the
lookups of watched txs, payments and address watches, and the chain's tags (the
``finalized`` and ``safe`` heights, the quorum gate's last answer). Every piece is rebuilt
from the store after a restart or a takeover (:meth:`ChainMemory.load`).

Memory moves in one place only, :meth:`ChainMemory.after_commit`, given the
:class:`~watcher.engine.values.BlockOutcome` of a transaction that committed: a failed
transaction leaves memory where the store is (as the tracker's window already did).
"""

from __future__ import annotations

from collections.abc import Iterable

from chains.models import BlockHeader
from chains.quorum import GateResult
from chains.tracker import HeaderWindow
from guard.payment import PAYMENT_KIND
from guard.types import BlockHash, BlockNumber
from watcher.engine.deposits_index import SubscriptionIndex
from watcher.engine.index import WatchIndex
from watcher.engine.observe import ChainPosition
from watcher.engine.payments_index import PaymentIndex
from watcher.engine.tags import ChainTags
from watcher.engine.values import BlockOutcome
from watcher.store.payment_records import PaymentState
from watcher.store.records import SettlementRecord
from watcher.store.store import Store


class ChainMemory:
    """The indexes, window and tags of one chain (see the module doc)."""

    def __init__(self, name: str, store: Store, window_size: int) -> None:
        self.name = name
        self.store = store
        self.window = HeaderWindow(window_size)
        self.index = WatchIndex()
        self.payments = PaymentIndex()
        self.subscriptions = SubscriptionIndex()
        """The standing address watches (deposits: watcher/engine/deposits_*.py)."""
        self.tags = ChainTags()
        """The tags at the last committed block (``finalized`` as last known)."""
        self.stored_finalized: int | None = None
        """The ``finalized`` height last written to the store by this engine."""
        self.approval: GateResult | None = None
        """The quorum gate's answer at the last committed block: decisions made between
        blocks (deadlines, probes without an answer of their own) are held by it."""

    # -- loading from the store ----------------------------------------------------------

    def load(self) -> None:
        """Rebuild the window, the tags and the watch index from the store."""
        self.window.reset(
            BlockHeader(BlockNumber(n), BlockHash(h), BlockHash(p), ts)
            for n, h, p, ts in self.store.headers(self.name)
        )
        record = self.store.chain(self.name)
        finalized = record.finalized_number if record else None
        self.tags = ChainTags(finalized=finalized, known_finalized=finalized)
        for entry in self.store.watch_entries(self.name):
            self.index.add(entry)

    def load_new(self) -> None:
        """Index what was registered since the last look (one indexed query each)."""
        for entry in self.store.watch_entries(self.name, self.index.max_seq):
            self.index.add(entry)
        for watch in self.store.payment_watches(self.name, self.payments.max_seq):
            self.payments.add(watch)
        for address in self.store.address_watches(self.name, self.subscriptions.max_seq):
            self.subscriptions.add(address)
        self.subscriptions.set_active(self.store.matched_subscriptions(self.name))

    def forget(self) -> None:
        """Forget everything (the next poll reloads from the store): another instance may
        have moved the chain on meanwhile, and only the store's committed state counts."""
        self.index = WatchIndex()
        self.payments = PaymentIndex()
        self.subscriptions = SubscriptionIndex()
        self.window.reset(())

    # -- what the engine reads -----------------------------------------------------------

    @property
    def finalized_number(self) -> int | None:
        """The last known ``finalized`` height."""
        return self.tags.known_finalized

    @property
    def watching_transfers(self) -> bool:
        """Whether a payment or a subscription is watched (transfers matter)."""
        return bool(self.payments.by_id) or self.subscriptions.active

    @property
    def watched(self) -> bool:
        """Whether anything at all is watched (tags are fetched only then)."""
        return bool(self.index.by_id) or self.watching_transfers

    def position(self, tags: ChainTags | None = None) -> ChainPosition | None:
        """The chain position at the last processed head (no untrusted tag), with ``tags``
        read since (else memory's); None before the first block."""
        head = self.window.head
        if head is None:
            return None
        tags = self.tags if tags is None else tags
        return ChainPosition(head.number, head.hash, tags.known_finalized, safe_number=tags.safe)

    # -- moving after a commit -----------------------------------------------------------

    def after_commit(self, outcome: BlockOutcome) -> list[str]:
        """Move memory to match a committed transaction. Returns the ids of payments to
        index again (a reorg reversed them: watched again), for :meth:`reindex_payments`."""
        if outcome.tags is not None:
            self.tags = outcome.tags
            self.approval = outcome.approval
        if outcome.stored_finalized is not None:
            self.stored_finalized = outcome.stored_finalized
        if outcome.rewind_to is not None:
            self.window.rewind_to(outcome.rewind_to)
        if outcome.pushed is not None:
            self.window.push(outcome.pushed)
        for rec in outcome.changed:
            self.index.update(rec)
        return self._follow_payments(outcome.paid)

    def updated(self, records: Iterable[SettlementRecord], tags: ChainTags | None) -> None:
        """Index the records a committed look-up transaction wrote (or left as they were),
        and keep the tags it read (None: it read none)."""
        if tags is not None:
            self.tags = tags
        for rec in records:
            self.index.update(rec)

    def reindex_payments(self, ids: list[str]) -> None:
        """Index the payments ``ids`` again, from the store."""
        if ids:
            for watch in self.store.payment_watches(self.name, 0, ids=ids):
                self.payments.add(watch)

    def _follow_payments(self, changed: Iterable[PaymentState]) -> list[str]:
        """Forget payments no longer watched; return reversed ones not indexed."""
        back: list[str] = []
        for rec in changed:
            if not rec.watching:
                self.payments.remove(rec.settlement_id)
            elif rec.kind == PAYMENT_KIND and rec.settlement_id not in self.payments.by_id:
                back.append(rec.settlement_id)
        return back
