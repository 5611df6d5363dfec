"""The per-chain poller: head tracker → guard → store, one transaction per block.

:class:`ChainWatcher` owns one chain. Each :meth:`ChainWatcher.poll` does, in order:

1. picks up settlements registered since the last poll (one indexed query);
2. looks new (and, within a small budget, still unseen) transactions up by hash, to learn
   their sender and nonce while pending (replacement is provable only then) and to record
   inclusions that happened before registration;
3. asks the tracker what changed on chain (one ``eth_getBlockByNumber(latest, true)`` in
   steady state) and, for each new block: finds watched txs by set lookup and same-nonce
   replacements by (sender, nonce) lookup, fetches receipts only for blocks that hold a
   watched tx, and commits the block's header, head pointer, inclusion changes, reorg
   record, verdicts and events in **one** store transaction;
4. with no new block, still applies deadlines (timeouts are a matter of time, not blocks).

Every verdict change and event is written together with the outbox rows it produces (the
commit or discard to the caller, provisional updates, alert webhooks), in the same store
transaction, by an :class:`~watcher.delivery.plan.OutboxPlan`: a crash can never separate
"the verdict changed" from "the caller will be told".

Memory holds only indexes (tx hash → settlement, (sender, nonce) → settlements) and the
header window; the store is the truth, and a restart rebuilds both from it.

This module is the poll loop; each step is its own module: ``blocks`` (a block's
transaction, with ``matching`` and ``reorgs``), ``lookups`` (txs by hash), ``deadlines``
(time-only changes), ``settle`` (one decision), ``health`` (node alerts).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from chains.block_facts import facts_of
from chains.budget import CallBudget, CallsDeferred
from chains.errors import ChainError
from chains.finality_modes import NEEDS_FINALIZED, NEEDS_SAFE
from chains.models import Block, BlockHeader
from chains.quorum import FinalityGate, GateResult, SingleNodeGate
from chains.rpc import RpcClient
from chains.tracker import Advance, HeaderWindow, HeadTracker, Reorg
from guard.settlement import SettlementPolicy
from guard.types import BlockHash, BlockNumber
from watcher import otel_tracing
from watcher.clock import Clock, wall_clock_ms
from watcher.config.chains import ChainConfig
from watcher.delivery.plan import OutboxPlan
from watcher.engine.blocks import BlockCommits, ChainInconsistentReceipts
from watcher.engine.deadlines import Deadlines
from watcher.engine.decisions import record_event
from watcher.engine.deposits_index import SubscriptionIndex
from watcher.engine.health import UNHEALTHY_AFTER_POLLS, ChainHealth
from watcher.engine.index import WatchIndex
from watcher.engine.lookups import TxLookups
from watcher.engine.payments_index import PaymentIndex
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

FINALITY_SECONDS_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0, 1800.0, 3600.0)
"""Buckets of the inclusion → finality time histogram (seconds)."""


@dataclass
class PollStats:
    """What one poll did (for logs, metrics and tests)."""

    blocks: int = 0
    reorg: Reorg | None = None
    lagging: bool = False
    behind: int = 0
    decisions: int = 0
    probes: int = 0
    skipped: str | None = None
    """Why the poll did not run (or stopped early): the RPC budget or rate limits."""


class ChainWatcher(BlockCommits, TxLookups, Deadlines):
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
    ) -> None:
        self.config = config
        self.name = config.name
        self.store = store
        self.client = client
        self.clock = clock
        self.budget = budget
        """The chain's calls-per-minute budget (shared with the client's transports): polls
        are planned within it. None: no budget."""
        self.deferred: str | None = None
        """Why the last poll was skipped or cut short by our own limits (None when it ran)."""
        self._deferred_logged_at: float | None = None
        self._max_batch = client.max_batch
        self.gate = gate or SingleNodeGate(client.endpoint)
        """Which settlements enough endpoints agree on before they may become terminal."""
        self._approval: GateResult | None = None
        self.policy = SettlementPolicy(max_wait_ms=int(config.max_wait_s * 1000))
        self.window = HeaderWindow(config.resolved_header_window)
        self.tracker = HeadTracker(
            config.name,
            client,
            self.window,
            config.max_blocks_per_poll,
            recorded=lambda below, limit: store.recorded_blocks(config.name, below, limit),
        )
        self.facts = facts_of(client)
        """What the tracker fetched (compact headers, block receipts, tx locations): each
        block's header fields are stored with it, so receipts never fetch them again."""
        self._fresh_indexes()
        self.probe_batch = probe_batch
        self.reprobe_per_minute = reprobe_per_minute
        self._reprobe_tokens = 0.0
        self._reprobe_at = 0
        self.finalized_number: int | None = None
        self.last_error: str | None = None
        self.lagging = False
        self.polls = 0
        self._started = False
        self._started_once = False
        self.fence: tuple[str, int] | None = None
        """(owner, fencing token) every store write of this chain carries; None when this
        instance runs alone (SQLite). Set by the handoff manager when it takes the lease."""
        self.plan = plan or OutboxPlan()
        """Which outbox rows a change produces; the delivery component sets its alert routes."""
        self.finality_seconds = Buckets(FINALITY_SECONDS_BUCKETS)
        """Time from the inclusion block's timestamp to the stored FINALITY_CONFIRMED."""
        self._confirmed_blocks: list[int] = []
        self.health = ChainHealth(self.name, clock, self._store_event)
        """The node's health (``rpc_unhealthy`` / ``rpc_recovered``), fed by note_poll."""

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Load the header window and the watched settlements from the store."""
        self.store.ensure_chain(self.name, self.config.chain_id, self.clock())
        self.window.reset(
            BlockHeader(BlockNumber(n), BlockHash(h), BlockHash(p), ts)
            for n, h, p, ts in self.store.headers(self.name)
        )
        record = self.store.chain(self.name)
        self.finalized_number = record.finalized_number if record else None
        for entry in self.store.watch_entries(self.name):
            self.index.add(entry)
        if self.config.finality_risk is not None and not self._started_once:
            log.warning("%s", self.config.finality_risk)  # the config's explicit choice
        self._started_once = True
        self._started = True

    def _fresh_indexes(self) -> None:
        """Empty lookups (the store is the truth): watched txs, payments to addresses, and
        the standing address watches of deposits."""
        self.index = WatchIndex()
        self.payments = PaymentIndex()
        self.subscriptions = SubscriptionIndex()

    def reset(self) -> None:
        """Forget everything held in memory, so the next poll reloads it from the store.

        Called when this instance (re)gains the lease: another instance may have moved the
        chain on meanwhile, and only the store's committed state is the checkpoint."""
        self._fresh_indexes()
        self.window.reset(())
        self._started = False

    @property
    def head(self) -> BlockHeader | None:
        """Last processed head."""
        return self.window.head

    # -- polling -------------------------------------------------------------------------

    def poll(self) -> PollStats:
        """One round: new registrations, probes, new blocks, deadlines. See the module doc."""
        if not self._started:
            self.start()
        stats = PollStats()
        spent_before = 0
        if self.budget is not None:
            refusal = self.budget.refusal()
            if refusal is not None:
                self.budget.skipped()
                stats.skipped = self._defer(refusal)
                return stats
            spent_before = self.budget.spent_total
            self._fit_budget(self.budget.remaining)
        self.polls += 1
        for entry in self.store.watch_entries(self.name, self.index.max_seq):
            self.index.add(entry)
        self._load_payments()
        try:
            with otel_tracing.span("finality.poll", {"finality.chain": self.name}):
                self._round(stats)
            self.last_error = None
            self.deferred = None
        except CallsDeferred as exc:
            # Our own limit, not the node: what was committed stands, the rest waits.
            stats.skipped = self._defer(str(exc))
        finally:
            if self.budget is not None:
                self.budget.note_poll_cost(self.budget.spent_total - spent_before)
        return stats

    def _round(self, stats: PollStats) -> None:
        """Probes, then the tracker's advance, then deadlines; a node error is logged and
        raised after the deadlines were applied anyway."""
        probe_error: ChainError | None = None
        deadlines_done = False
        try:
            try:
                stats.probes = self._probe()
            except CallsDeferred:
                raise
            except ChainError as exc:
                # Looking new txs up failed (a method the node lacks, an odd answer): blocks
                # and deadlines go on; the error is raised after them, so health names it.
                probe_error = exc
            deadlines_done = self._advance(stats, self.tracker.poll())
            if probe_error is not None:
                raise probe_error
        except CallsDeferred:
            raise
        except ChainError as exc:
            self.last_error = str(exc)
            log.warning("chain %s: poll failed, will retry: %s", self.name, exc)
            if not deadlines_done:
                self._deadlines_despite(exc)
            raise

    def _commit_traced(
        self,
        block: Block | None,
        reorg: Reorg | None,
        finalized: int | None,
        node_head: BlockHeader,
    ) -> int:
        """:meth:`_commit_block` in a ``finality.block_commit`` span (watcher/otel_tracing.py)."""
        at = block.header if block is not None else (reorg.common_ancestor if reorg else None)
        attributes = {"finality.chain": self.name, "finality.block": at.number if at else -1}
        with otel_tracing.span("finality.block_commit", attributes):
            return self._commit_block(block, reorg, finalized, node_head)

    def _advance(self, stats: PollStats, advance: Advance) -> bool:
        """Commit what the tracker found (a transaction per block); with no new block, apply
        deadlines. Returns whether deadlines were applied."""
        self.lagging = advance.lagging
        stats.lagging = advance.lagging
        stats.behind = advance.behind
        finalized = (
            self._finalized(advance.node_head.number) if advance.blocks else self.finalized_number
        )
        blocks = self._prefetch_logs(advance.blocks, advance.reorg)  # eth_getLogs, for tokens
        stats.behind += len(advance.blocks) - len(blocks)  # a node capping eth_getLogs' range
        for i, block in enumerate(blocks):
            reorg = advance.reorg if i == 0 else None
            stats.decisions += self._commit_traced(block, reorg, finalized, advance.node_head)
            stats.blocks += 1
        if advance.reorg is not None and not advance.blocks:
            stats.decisions += self._commit_traced(
                None, advance.reorg, finalized, advance.node_head
            )
        stats.reorg = advance.reorg
        if advance.reorg is not None and advance.reorg.beyond_window:
            stats.probes += self._recheck_after_rebase()
        if advance.blocks:
            return False
        stats.decisions += self._apply_deadlines()
        return True

    def _fit_budget(self, room: int) -> None:
        """Size this poll's batches to the calls left in the budget window, so that a
        catch-up after a long gap (or a reorg walk, or a burst of registrations) advances a
        little every window instead of asking for more than the budget and never landing."""
        share = max(1, room - 3)  # the head, receipts, the gate
        self.tracker.max_blocks_per_poll = min(self.config.max_blocks_per_poll, share)
        self.client.max_batch = min(self._max_batch, share)
        self._probe_limit = max(1, share // 3)  # by hash, receipt or raw bytes

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

    def _finalized(self, head_number: int) -> int | None:
        """The ``finalized`` height: fetched (one call) only when the policy uses it and
        something is watched; otherwise the last known value. Under the ``safe`` rule the
        ``safe`` tag is fetched instead, into :attr:`safe_number` (chains.finality_modes)."""
        mode = self.config.resolved_finality
        watched = bool(self.index.by_id) or self.watching_transfers
        if mode in NEEDS_SAFE and watched:
            tagged = self.client.header("safe")
            if tagged is not None:
                self.safe_number = BlockNumber(tagged.number)
            return self.finalized_number
        if mode not in NEEDS_FINALIZED or not watched:
            return self.finalized_number
        header = self.client.header("finalized")
        own: int | None = header.number if header is not None else None
        if not self.gate.trivial:
            # A quorum gate: our node's tag counts only as far as k endpoints' tags reach
            # (the k-th highest); until enough have answered, nothing is finalized for us.
            bound = self.gate.finalized_bound(head_number, own)
            self.untrusted_finalized = own if own != bound else None
            if bound is None:
                return None
            own = bound
        if own is not None:
            self.finalized_number = BlockNumber(own)
        return self.finalized_number

    # -- node health (watcher.engine.health) ---------------------------------------------

    def note_poll(self, error: str | None, at_once: bool = False) -> None:
        """Track the node's health after a poll job (see :mod:`watcher.engine.health`): a
        poll is bad when it failed (``error``) or the node lags behind the processed head;
        ``at_once``: report it now (the node's data failed a check)."""
        reason = error
        if reason is None and self.lagging:
            head = self.window.head
            reason = (
                f"node at {self.client.endpoint} is behind the processed head "
                f"{head.number if head else '?'} (lagging, or went backwards)"
            )
        head_number = self.head.number if self.head else None
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
            with self.store.block_txn(self.name, self.clock(), self.fence) as txn:
                record_event(txn, self.plan, kind, severity, payload)
        except StoreError as exc:
            log.warning("chain %s: cannot store %s event: %s", self.name, kind, exc)
            return False
        return True
