"""One block through the engine as two values: what it needs, and what it changed.

:class:`BlockInput` is everything one block transaction depends on, fetched before the
transaction opens (:func:`watcher.engine.fetch.fetch_block`): no network call happens
inside a store transaction. :class:`BlockOutcome` is what the transaction changed
(:func:`watcher.engine.apply.apply_block`); memory moves from it only after the commit
(:meth:`watcher.engine.memory.ChainMemory.after_commit`). A deadline (no new block) and a
block are the same kind of input: one with no block, no reorg and no new head.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from chains.models import Block, BlockHeader, TxReceipt
from chains.quorum import GateResult
from chains.tracker import Reorg
from watcher.engine.matching import BlockMatches
from watcher.engine.observe import ChainPosition
from watcher.engine.payments_fetch import NO_TRANSFERS, BlockTransfers
from watcher.engine.tags import ChainTags
from watcher.store.deposit_records import SubscriptionRecord
from watcher.store.payment_records import PaymentState
from watcher.store.records import SettlementRecord

NO_MATCHES = BlockMatches([], [])


@dataclass(frozen=True)
class BlockInput:
    """Everything one block transaction needs (see the module doc)."""

    now: int
    """The time the transaction is decided at (ms)."""
    head: BlockHeader
    """The head decisions are made at: the block's header, a reorg's common ancestor (a
    reorg seen without a new block), or the last processed head (a deadline)."""
    position: ChainPosition
    """Where the chain stands for the decisions (the head and the tags)."""
    covered: int | None
    """The highest tag height that can make a settlement final (due queries)."""
    approval: GateResult | None = None
    """The quorum gate's answer, asked before the transaction (None: no gate, or between
    blocks the answer at the last block)."""
    tags: ChainTags | None = None
    """The tags memory adopts after the commit (None: a deadline, tags unchanged)."""
    block: Block | None = None
    """The new block (None for a reorg without one, or a deadline)."""
    reorg: Reorg | None = None
    """The reorg this transaction undoes (only with a poll's first block)."""
    node_head: BlockHeader | None = None
    """The node's ``latest`` in this poll: a reorg is recorded with it as the new branch's
    head (the block committed first is only the branch's bottom)."""
    new_head: bool = False
    """Whether :attr:`head` is stored as the new head (False for a deadline)."""
    compact_header: bytes | None = None
    """The head's header fields as fetched (stored with it: receipts never fetch them)."""
    store_finalized: int | None = None
    """The ``finalized`` height to store (None: unchanged)."""
    matches: BlockMatches = NO_MATCHES
    """The block's watched txs and same-nonce replacements."""
    receipts: Mapping[str, TxReceipt] = field(default_factory=dict)
    """The receipts of the block's watched txs, checked against its roots, by tx hash."""
    transfers: BlockTransfers = NO_TRANSFERS
    """The block's transfers that may pay a watched payment, and its deposits."""
    subscriptions: Mapping[str, SubscriptionRecord] = field(default_factory=dict)
    """The active subscriptions the block's deposits are written for."""
    transfers_watched: bool = True
    """Whether memory watched a payment or a subscription when the input was fetched: with
    none and no reorg, no payment can be due and the payment writes are skipped."""


@dataclass(frozen=True)
class BlockOutcome:
    """What one committed block transaction changed."""

    decisions: int
    """Decisions that changed something."""
    changed: tuple[SettlementRecord, ...] = ()
    """The watched settlements as now stored (the watch index follows them)."""
    paid: tuple[PaymentState, ...] = ()
    """The payments decided, as now stored (the payment index follows them)."""
    confirmed_blocks: tuple[int, ...] = ()
    """Inclusion blocks of the settlements that became FINALITY_CONFIRMED."""
    tags: ChainTags | None = None
    """The tags to adopt (None: unchanged)."""
    approval: GateResult | None = None
    """The gate's answer the block was decided with."""
    stored_finalized: int | None = None
    """The ``finalized`` height written (None: not written)."""
    rewind_to: int | None = None
    """The window rewinds to this height (a reorg's common ancestor)."""
    pushed: BlockHeader | None = None
    """The header pushed on the window (the new block)."""
