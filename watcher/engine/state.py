"""What every part of a chain's engine shares: its collaborators and its memory.

:class:`~watcher.engine.chain_watcher.ChainWatcher` is assembled from parts, one concept
each (``blocks``: a block's transaction; ``lookups``: txs asked by hash; ``deadlines``:
time-only changes); :class:`ChainState` declares what they all read, and the few helpers
they share, so that each part states its needs in one place.
"""

from __future__ import annotations

from chains.block_facts import BlockFacts
from chains.quorum import FinalityGate, GateResult
from chains.rpc import RpcClient
from chains.tracker import HeaderWindow
from guard.settlement import Reversal, SettlementPolicy
from watcher.clock import Clock
from watcher.config.chains import ChainConfig
from watcher.delivery.plan import OutboxPlan
from watcher.engine.index import WatchIndex
from watcher.engine.observe import ChainPosition
from watcher.engine.settle import Decided, Rules
from watcher.metrics import Buckets
from watcher.store.store import Store


class ChainState:
    """The collaborators and memory of one chain's engine (set by ChainWatcher.__init__)."""

    name: str
    config: ChainConfig
    store: Store
    client: RpcClient
    clock: Clock
    policy: SettlementPolicy
    window: HeaderWindow
    facts: BlockFacts
    index: WatchIndex
    gate: FinalityGate
    plan: OutboxPlan
    fence: tuple[str, int] | None
    finalized_number: int | None
    finality_seconds: Buckets
    _approval: GateResult | None
    _confirmed_blocks: list[int]
    untrusted_finalized: int | None = None
    """Our node's ``finalized`` height when the quorum gate did not trust it that far."""
    safe_number: int | None = None
    """The node's ``safe`` height (fetched only under the ``safe`` rule; not stored: it is
    fetched again after a restart)."""

    def _rules(self, approval: GateResult | None = None, reversal: Reversal | None = None) -> Rules:
        """The rules decisions are made with now (``approval``: default, the gate's answer
        asked before the current block's transaction)."""
        return Rules(
            chain=self.name,
            policy=self.policy,
            late_watch_ms=int(self.config.late_watch_s * 1000),
            plan=self.plan,
            gated=not self.gate.trivial,
            approval=approval or self._approval,
            reversal=reversal,
        )

    def _covered(self, finalized: int | None) -> int | None:
        """The highest tag height that can make a settlement final (``finalized``, or the
        ``safe`` tag under the ``safe`` rule): what the store's due and anchor queries and
        the gate are asked with."""
        if self.safe_number is None:
            return finalized
        return self.safe_number if finalized is None else max(finalized, self.safe_number)

    def _position(self, number: int, block_hash: str) -> ChainPosition:
        """The chain position at the last processed head (no untrusted tag)."""
        return ChainPosition(
            number, block_hash, self.finalized_number, safe_number=self.safe_number
        )

    def _count(self, decided: Decided) -> int:
        """1 if a decision changed something (noting a new confirmation), else 0."""
        if decided.confirmed_block is not None:
            self._confirmed_blocks.append(decided.confirmed_block)
        return 1 if decided.changed else 0

    def _observe_confirmed(self, now: int) -> None:
        """Feed the inclusion → finality histogram with what the last transaction confirmed."""
        for number in self._confirmed_blocks:
            header = self.window.get(number)
            if header is not None:
                self.finality_seconds.observe(max(0.0, now / 1000 - header.timestamp))
        self._confirmed_blocks = []
