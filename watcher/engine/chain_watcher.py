"""The per-chain poller: head tracker → guard → store, one transaction per block.

:class:`ChainWatcher` owns one chain. Each :meth:`ChainWatcher.poll` does, in order:

1. picks up settlements registered since the last poll (one indexed query);
2. asks the tracker what changed on chain (one ``eth_getBlockByNumber(latest, true)`` in
   steady state) and, for each new block: fetches everything the block needs
   (:func:`~watcher.engine.fetch.fetch_block`: matches, receipts, transfers, the quorum
   gate's approval), then applies it in **one** store transaction
   (:func:`~watcher.engine.apply.apply_block`: header, head pointer, inclusions, reorg
   record, verdicts, events), then moves memory (:class:`~watcher.engine.memory.ChainMemory`);
3. with no new block, still applies deadlines (timeouts are a matter of time, not blocks),
   through the same :func:`~watcher.engine.apply.apply_block`;
4. looks new (and, within a small budget, still unseen) transactions up by hash, to learn
   their sender and nonce while pending (replacement is provable only then) and to record
   inclusions that happened before registration (``lookups``), decided at once against the
   head just processed.

The head is read first, at the poll's start: the look-ups of a burst of registrations
(a thousand by hash, hundreds of milliseconds) used to run before it, so every block's
verdicts waited for them, and the poll pacer (watcher/app/pacing.py), which takes the
poll's start for the moment the chain was read, saw blocks "found" that came after that
moment and moved the phase earlier poll after poll, round the whole interval. A tx the new
blocks include is recorded by the block scan and is then no longer due for a look-up.

Every verdict change and event is written together with the outbox rows it produces (the
commit or discard to the caller, provisional updates, alert webhooks), in the same store
transaction, by an :class:`~watcher.delivery.plan.OutboxPlan`: a crash can never separate
"the verdict changed" from "the caller will be told".

What one poll may ask of the node (a call budget's share) is a
:class:`~chains.tracker.PollLimits` value passed down the poll, never a setting changed on
the tracker or the shared client. The fencing token every write carries is asked of
``fence_of`` at each transaction, as the receipts and sources do.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from chains.block_facts import facts_of
from chains.budget import CallBudget, CallsDeferred
from chains.errors import ChainError
from chains.models import BlockHeader
from chains.quorum import FinalityGate, SingleNodeGate
from chains.rpc import RpcClient
from chains.tracker import HeaderWindow, HeadTracker, PollLimits
from guard.settlement import SettlementPolicy
from watcher import otel_tracing
from watcher.clock import Clock, wall_clock_ms
from watcher.config.chains import ChainConfig
from watcher.delivery.plan import OutboxPlan
from watcher.engine.decisions import record_event
from watcher.engine.deposits_index import SubscriptionIndex
from watcher.engine.fetch import (
    ChainInconsistentReceipts,
    ChainSource,
)
from watcher.engine.health import UNHEALTHY_AFTER_POLLS, ChainHealth
from watcher.engine.index import WatchIndex
from watcher.engine.lookups import TxLookups
from watcher.engine.memory import ChainMemory
from watcher.engine.payments_index import PaymentIndex
from watcher.engine.pipeline import (
    FINALITY_SECONDS_BUCKETS,
    BlockPipeline,
    FenceOf,
    PollStats,
    unfenced,
)
from watcher.engine.rules import ChainRules
from watcher.metrics import Buckets
from watcher.store.errors import StoreError
from watcher.store.store import Store

__all__ = [
    "FINALITY_SECONDS_BUCKETS",
    "UNHEALTHY_AFTER_POLLS",
    "ChainInconsistentReceipts",
    "ChainWatcher",
    "PollStats",
]

log = logging.getLogger("finality.engine")


class ChainWatcher:
    """Follows one chain and keeps its settlements' verdicts in the store."""

    def __init__(
        self,
        config: ChainConfig,
        store: Store,
        client: RpcClient,
        clock: Clock = wall_clock_ms,
        probe_batch: int = 1000,
        reprobe_per_minute: int = 6,
        plan: OutboxPlan | None = None,
        gate: FinalityGate | None = None,
        budget: CallBudget | None = None,
        fence_of: FenceOf = unfenced,
    ) -> None:
        self.config = config
        self.name = config.name
        self.store = store
        self.client = client
        self.clock = clock
        self.budget = budget
        """The chain's calls-per-minute budget (shared with the client's transports): polls
        are planned within it. None: no budget."""
        self.fence_of = fence_of
        """Asked for the fencing token at every transaction (the handoff's leases)."""
        self.deferred: str | None = None
        """Why the last poll was skipped or cut short by our own limits (None when it ran)."""
        self._deferred_logged_at: float | None = None
        self.gate = gate or SingleNodeGate(client.endpoint)
        """Which settlements enough endpoints agree on before they may become terminal."""
        self.policy = SettlementPolicy(max_wait_ms=int(config.max_wait_s * 1000))
        self.memory = ChainMemory(config.name, store, config.resolved_header_window)
        self.tracker = HeadTracker(
            config.name,
            client,
            self.memory.window,
            config.max_blocks_per_poll,
            recorded=lambda below, limit: store.recorded_blocks(config.name, below, limit),
        )
        self.facts = facts_of(client)
        """What the tracker fetched (compact headers, block receipts, tx locations): each
        block's header fields are stored with it, so receipts never fetch them again."""
        self.source = ChainSource(config.name, store, client, self.facts, self.gate)
        self.lookups = TxLookups(self.source, fence_of, probe_batch, reprobe_per_minute)
        self.pipeline = BlockPipeline(
            config, self.source, self.memory, self.lookups, clock, fence_of, self._rules
        )
        self.last_error: str | None = None
        self.lagging = False
        self.polls = 0
        self._started = False
        self._started_once = False
        self.plan = plan or OutboxPlan()
        """Which outbox rows a change produces; the delivery component sets its alert routes."""
        self.health = ChainHealth(self.name, clock, self._store_event)
        """The node's health (``rpc_unhealthy`` / ``rpc_recovered``), fed by note_poll."""

    # -- what others read (memory stays the engine's) ------------------------------------

    @property
    def head(self) -> BlockHeader | None:
        """Last processed head."""
        return self.memory.window.head

    @property
    def window(self) -> HeaderWindow:
        """The processed headers."""
        return self.memory.window

    @property
    def index(self) -> WatchIndex:
        """The watched settlements."""
        return self.memory.index

    @property
    def payments(self) -> PaymentIndex:
        """The watched payments."""
        return self.memory.payments

    @property
    def subscriptions(self) -> SubscriptionIndex:
        """The standing address watches."""
        return self.memory.subscriptions

    @property
    def finalized_number(self) -> int | None:
        """The last known ``finalized`` height."""
        return self.memory.finalized_number

    @property
    def safe_number(self) -> int | None:
        """The node's ``safe`` height (fetched only under the ``safe`` rule)."""
        return self.memory.tags.safe

    @property
    def untrusted_finalized(self) -> int | None:
        """Our node's ``finalized`` height when the quorum gate did not trust it that far."""
        return self.memory.tags.untrusted

    @property
    def watching_transfers(self) -> bool:
        """Whether a payment or a subscription is watched (transfers matter)."""
        return self.memory.watching_transfers

    @property
    def finality_seconds(self) -> Buckets:
        """Time from the inclusion block's timestamp to the stored FINALITY_CONFIRMED."""
        return self.pipeline.finality_seconds

    @property
    def fence(self) -> tuple[str, int] | None:
        """The fencing token the next write carries."""
        return self.fence_of(self.name)

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Load the header window and the watched settlements from the store."""
        self.store.ensure_chain(self.name, self.config.chain_id, self.clock())
        self.memory.load()
        if self.config.finality_risk is not None and not self._started_once:
            log.warning("%s", self.config.finality_risk)  # the config's explicit choice
        self._started_once = True
        self._started = True

    def reset(self) -> None:
        """Forget everything held in memory, so the next poll reloads it from the store.

        Called when this instance (re)gains the lease: another instance may have moved the
        chain on meanwhile, and only the store's committed state is the checkpoint."""
        self.memory.forget()
        self._started = False

    # -- polling -------------------------------------------------------------------------

    def poll(self, decided: Callable[[], None] | None = None) -> PollStats:
        """One round: new registrations, new blocks, deadlines, look-ups (see the module
        doc). ``decided`` is called once the blocks' transactions committed a decision,
        before the look-ups: the receipts and deliveries of those decisions need not wait
        for them."""
        if not self._started:
            self.start()
        stats = PollStats()
        spent_before = 0
        limits = self.tracker.default_limits
        if self.budget is not None:
            refusal = self.budget.refusal()
            if refusal is not None:
                self.budget.skipped()
                stats.skipped = self._defer(refusal)
                return stats
            spent_before = self.budget.spent_total
            limits = self._limits_within(self.budget.remaining)
        self.polls += 1
        self.memory.load_new()
        try:
            with otel_tracing.span("finality.poll", {"finality.chain": self.name}):
                self._round(stats, limits, decided)
            self.last_error = None
            self.deferred = None
        except CallsDeferred as exc:
            # Our own limit, not the node: what was committed stands, the rest waits.
            stats.skipped = self._defer(str(exc))
        finally:
            if self.budget is not None:
                self.budget.note_poll_cost(self.budget.spent_total - spent_before)
        return stats

    def _round(
        self, stats: PollStats, limits: PollLimits, decided: Callable[[], None] | None
    ) -> None:
        """The tracker's advance (and deadlines), then probes; a node error is logged and
        raised after the deadlines were applied anyway. A failing look-up (a method the
        node lacks, an odd answer) comes after the blocks and deadlines, so it holds
        neither back; it is raised so that health names it."""
        deadlines_done = False
        try:
            advance = self.tracker.poll(limits)
            self.lagging = advance.lagging
            deadlines_done = self.pipeline.advance(stats, advance)
            if stats.decisions and decided is not None:
                decided()
            stats.probes = self.pipeline.probe(limits.max_probes, limits.max_batch)
        except CallsDeferred:
            raise
        except ChainError as exc:
            self.last_error = str(exc)
            log.warning("chain %s: poll failed, will retry: %s", self.name, exc)
            if not deadlines_done:
                self.pipeline.deadlines_despite(exc)
            raise

    def _rules(self) -> ChainRules:
        """The rules a transaction is applied with (built per transaction: a change of
        alert routes is seen at once)."""
        return ChainRules(self.config, self.policy, self.plan, gated=not self.gate.trivial)

    def _limits_within(self, room: int) -> PollLimits:
        """This poll's limits within the calls left in the budget window, so that a
        catch-up after a long gap (or a reorg walk, or a burst of registrations) advances a
        little every window instead of asking for more than the budget and never landing."""
        share = max(1, room - 3)  # the head, receipts, the gate
        return PollLimits(
            max_blocks=min(self.config.max_blocks_per_poll, share),
            max_batch=share,
            max_probes=max(1, share // 3),  # by hash, receipt or raw bytes
        )

    def _defer(self, reason: str) -> str:
        """Record why polling waits on our own limits; log it at most once a minute."""
        self.deferred = reason
        now = time.monotonic()
        if self._deferred_logged_at is None or now - self._deferred_logged_at >= 60.0:
            self._deferred_logged_at = now
            log.warning("chain %s: poll skipped, settlements wait: %s", self.name, reason)
        return reason

    def catch_up(self, max_rounds: int = 1000) -> PollStats:
        """Poll until the tracker reports nothing behind (bounded); returns the last stats."""
        stats = self.poll()
        rounds = 1
        while stats.behind > 0 and rounds < max_rounds:
            stats = self.poll()
            rounds += 1
        return stats

    # -- node health (watcher.engine.health) ---------------------------------------------

    def note_poll(self, error: str | None, at_once: bool = False) -> None:
        """Track the node's health after a poll job (see :mod:`watcher.engine.health`): a
        poll is bad when it failed (``error``) or the node lags behind the processed head;
        ``at_once``: report it now (the node's data failed a check)."""
        reason = error
        head = self.head
        if reason is None and self.lagging:
            reason = (
                f"node at {self.client.endpoint} is behind the processed head "
                f"{head.number if head else '?'} (lagging, or went backwards)"
            )
        head_number = head.number if head else None
        self.health.note_poll(reason, self.client.endpoint, head_number, at_once)

    def endpoint_problem(self, endpoint: str, reason: str) -> bool:
        """One ``rpc_unhealthy`` event about one endpoint; False if the store failed."""
        return self.health.endpoint_problem(endpoint, reason)

    def endpoint_event(
        self, kind: str, severity: str, endpoint: str, state: str, reason: str
    ) -> bool:
        """One event about one endpoint's health change; False if the store failed."""
        return self.health.endpoint_event(kind, severity, endpoint, state, reason)

    def _store_event(self, kind: str, severity: str, payload: dict[str, Any]) -> bool:
        """Store one event (and its alerts) in its own transaction; False if the store failed."""
        try:
            with self.store.block_txn(self.name, self.clock(), self.fence_of(self.name)) as txn:
                record_event(txn, self.plan, kind, severity, payload)
        except StoreError as exc:
            log.warning("chain %s: cannot store %s event: %s", self.name, kind, exc)
            return False
        return True
