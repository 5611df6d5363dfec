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
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from chains.block_facts import facts_of
from chains.budget import CallBudget, CallsDeferred
from chains.errors import ChainError
from chains.finality_modes import NEEDS_FINALIZED, NEEDS_SAFE
from chains.models import Block, BlockHeader
from chains.quorum import Anchor, FinalityGate, GateResult, SingleNodeGate
from chains.rpc import RpcClient
from chains.tracker import HeaderWindow, HeadTracker, Reorg
from guard.settlement import (
    Decision,
    Evidence,
    Reversal,
    SettlementPolicy,
    TransitionKind,
    Verdict,
    decision_from_json,
    settle_transition,
)
from guard.types import BlockHash, BlockNumber, UnixMillis
from watcher.clock import Clock, wall_clock_ms
from watcher.config.chains import ChainConfig
from watcher.delivery.plan import OutboxPlan
from watcher.engine.decisions import record_event, store_decision
from watcher.engine.observe import ChainPosition, decide
from watcher.engine.probes import located_info, lookup, receipts_by_block
from watcher.metrics import Buckets
from watcher.store import BlockTxn, SettlementRecord, Store, StoreError, WatchEntry

log = logging.getLogger("finality.engine")

UNHEALTHY_AFTER_POLLS = 3
"""Consecutive failed (or lagging) polls after which ``rpc_unhealthy`` is raised, once."""

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


@dataclass
class _Index:
    """In-memory lookups over the watched settlements of one chain."""

    by_id: dict[str, WatchEntry] = field(default_factory=dict)
    by_hash: dict[str, str] = field(default_factory=dict)
    by_sender_nonce: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    max_seq: int = 0

    def add(self, entry: WatchEntry) -> None:
        self.remove(entry.settlement_id)
        self.by_id[entry.settlement_id] = entry
        self.by_hash[entry.tx_hash] = entry.settlement_id
        if entry.sender is not None and entry.nonce is not None:
            self.by_sender_nonce.setdefault((entry.sender, entry.nonce), set()).add(
                entry.settlement_id
            )
        self.max_seq = max(self.max_seq, entry.seq)

    def remove(self, settlement_id: str) -> None:
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
        if rec.watching:
            self.add(
                WatchEntry(
                    rec.seq, rec.settlement_id, rec.tx_hash, rec.sender, rec.nonce, rec.block_number
                )
            )
        else:
            self.remove(rec.settlement_id)


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
    ) -> None:
        self.config = config
        self.budget = budget
        """The chain's calls-per-minute budget (shared with the client's transports): polls
        are planned within it. None: no budget."""
        self.deferred: str | None = None
        """Why the last poll was skipped or cut short by our own limits (None when it ran)."""
        self._deferred_logged_at: float | None = None
        self._max_batch = client.max_batch
        self.gate: FinalityGate = gate or SingleNodeGate(client.endpoint)
        """Which settlements enough endpoints agree on before they may become terminal."""
        self._approval: GateResult | None = None
        self.name = config.name
        self.store = store
        self.client = client
        self.clock = clock
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
        self.index = _Index()
        self.probe_batch = probe_batch
        self.reprobe_per_minute = reprobe_per_minute
        self._reprobe_tokens = 0.0
        self._reprobe_at = 0
        self.finalized_number: int | None = None
        self.last_error: str | None = None
        self.lagging = False
        self.polls = 0
        self._started = False
        self.fence: tuple[str, int] | None = None
        """(owner, fencing token) every store write of this chain carries; None when this
        instance runs alone (SQLite). Set by the handoff manager when it takes the lease."""
        self.plan = plan or OutboxPlan()
        """Which outbox rows a change produces; the delivery component sets its alert routes."""
        self.finality_seconds = Buckets(FINALITY_SECONDS_BUCKETS)
        """Time from the inclusion block's timestamp to the stored FINALITY_CONFIRMED."""
        self._confirmed_blocks: list[int] = []
        self._bad_polls = 0
        self._bad_since: int | None = None
        self._unhealthy_since: int | None = None

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

    def reset(self) -> None:
        """Forget everything held in memory, so the next poll reloads it from the store.

        Called when this instance (re)gains the lease: another instance may have moved the
        chain on meanwhile, and only the store's committed state is the checkpoint."""
        self.index = _Index()
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
            advance = self.tracker.poll()
            self.lagging = advance.lagging
            stats.lagging = advance.lagging
            stats.behind = advance.behind
            finalized = (
                self._finalized(advance.node_head.number)
                if advance.blocks
                else self.finalized_number
            )
            for i, block in enumerate(advance.blocks):
                reorg = advance.reorg if i == 0 else None
                stats.decisions += self._commit_block(block, reorg, finalized, advance.node_head)
                stats.blocks += 1
            if advance.reorg is not None and not advance.blocks:
                stats.decisions += self._commit_block(
                    None, advance.reorg, finalized, advance.node_head
                )
            stats.reorg = advance.reorg
            if advance.reorg is not None and advance.reorg.beyond_window:
                stats.probes += self._recheck_after_rebase()
            if not advance.blocks:
                deadlines_done = True
                stats.decisions += self._apply_deadlines()
            if probe_error is not None:
                raise probe_error
            self.last_error = None
            self.deferred = None
        except CallsDeferred as exc:
            # Our own limit, not the node: what was committed stands, the rest waits.
            stats.skipped = self._defer(str(exc))
        except ChainError as exc:
            self.last_error = str(exc)
            log.warning("chain %s: poll failed, will retry: %s", self.name, exc)
            if not deadlines_done:
                self._deadlines_despite(exc)
            raise
        finally:
            if self.budget is not None:
                self.budget.note_poll_cost(self.budget.spent_total - spent_before)
        return stats

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
        if mode in NEEDS_SAFE and self.index.by_id:
            tagged = self.client.header("safe")
            if tagged is not None:
                self.safe_number = BlockNumber(tagged.number)
            return self.finalized_number
        if mode not in NEEDS_FINALIZED or not self.index.by_id:
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

    # -- per block -----------------------------------------------------------------------

    def _commit_block(
        self,
        block: Block | None,
        reorg: Reorg | None,
        finalized: int | None,
        node_head: BlockHeader | None = None,
    ) -> int:
        """Everything one block changes, in one store transaction. Returns decisions made.

        ``node_head`` is the node's ``latest`` in this poll: a reorg is recorded with it as
        the new branch's head (the block committed first is only the branch's bottom)."""
        now = self.clock()
        self._confirmed_blocks = []
        matched: list[tuple[str, Any]] = []
        replacing: list[tuple[str, Any]] = []
        receipts: dict[str, Any] = {}
        # After a reorg, settlements that were anchored on the replaced blocks are not in
        # the watch index if they were terminal (a confirmed one is not watched): look for
        # them too, by hash and by (sender, nonce), or a tx re-included in the branch's first
        # block — or another tx of the same sender and nonce there — would be missed.
        reanchor: dict[str, str] = {}
        reanchor_nonce: dict[tuple[str, int], list[tuple[str, str]]] = {}
        if reorg is not None and block is not None:
            for tx_hash, anchored, sender, nonce in self.store.anchored_above(
                self.name, reorg.common_ancestor.number
            ):
                reanchor[tx_hash] = anchored
                if sender is not None and nonce is not None and anchored not in self.index.by_id:
                    reanchor_nonce.setdefault((sender, nonce), []).append((anchored, tx_hash))
        if block is not None:
            for tx in block.txs:
                sid = self.index.by_hash.get(tx.hash) or reanchor.get(tx.hash)
                if sid is not None:
                    matched.append((sid, tx))
                for other in self.index.by_sender_nonce.get((tx.sender, tx.nonce), ()):
                    if self.index.by_id[other].tx_hash != tx.hash:
                        replacing.append((other, tx))
                for other, other_hash in reanchor_nonce.get((tx.sender, tx.nonce), ()):
                    if other_hash != tx.hash:
                        replacing.append((other, tx))
            if matched:
                found = self.client.block_receipts(
                    block.header.hash, [tx.hash for _, tx in matched]
                )
                receipts = {r.tx_hash: r for r in found}
                missing = [tx.hash for _, tx in matched if tx.hash not in receipts]
                if missing:
                    raise ChainInconsistentReceipts(self.name, block.header.number, missing)
        head = block.header if block is not None else (reorg.common_ancestor if reorg else None)
        assert head is not None
        pos = ChainPosition(
            head.number, head.hash, finalized, self.untrusted_finalized, self.safe_number
        )
        changed: list[SettlementRecord] = []
        decisions = 0
        self._approval = self._ask_gate(head, self._covered(finalized))
        with self.store.block_txn(self.name, now, self.fence) as txn:
            touched_ids: set[str] = set()
            reversed_ids: set[str] = set()
            if reorg is not None:
                touched_ids, reversed_ids = self._apply_reorg(txn, reorg, node_head or head)
            if block is not None:
                h = block.header
                txn.put_header(
                    h.number,
                    h.hash,
                    h.parent_hash,
                    h.timestamp,
                    self.config.resolved_header_window,
                    self.facts.header(h.hash),
                )
                by_id = {
                    r.settlement_id: r for r in txn.by_ids([sid for sid, _ in matched + replacing])
                }
                for sid, tx in matched:
                    r = receipts[tx.hash]
                    txn.set_inclusion(
                        by_id[sid],
                        r.block_number,
                        r.block_hash,
                        r.tx_index,
                        r.status,
                        tx.sender,
                        tx.nonce,
                    )
                for sid, tx in replacing:
                    txn.set_replacement(by_id[sid], tx.hash, h.number, h.hash)
            else:
                txn.put_header(
                    head.number,
                    head.hash,
                    head.parent_hash,
                    head.timestamp,
                    self.config.resolved_header_window,
                    self.facts.header(head.hash),
                )
            if finalized is not None and finalized != self._stored_finalized:
                txn.set_finalized(finalized)
            late_ms = int(self.config.late_watch_s * 1000)
            covered = self._covered(finalized)
            due = {r.settlement_id: r for r in txn.due(head.number, covered, late_ms)}
            for r in txn.by_ids([i for i in reversed_ids if i not in due]):
                due[r.settlement_id] = r
            for rec in due.values():
                decisions += self._decide(txn, rec, pos, now, rec.settlement_id in reversed_ids)
            if block is not None:
                self.plan.on_progress(txn, head.number, head.hash, {sid for sid, _ in matched})
            changed = txn.by_ids(
                list({sid for sid, _ in matched + replacing} | set(due) | touched_ids)
            )
        # The transaction committed: now move memory to match the store.
        self._stored_finalized = finalized
        if reorg is not None:
            self.window.rewind_to(reorg.common_ancestor.number)
        if block is not None:
            self.window.push(block.header)
        for rec in changed:
            self.index.update(rec)
        self._observe_confirmed(now)
        return decisions

    _stored_finalized: int | None = None

    def _observe_confirmed(self, now: int) -> None:
        """Feed the inclusion → finality histogram with what the last transaction confirmed."""
        for number in self._confirmed_blocks:
            header = self.window.get(number)
            if header is not None:
                self.finality_seconds.observe(max(0.0, now / 1000 - header.timestamp))
        self._confirmed_blocks = []

    def _event(
        self,
        txn: BlockTxn,
        kind: str,
        severity: str,
        payload: dict[str, Any],
        settlement_id: str | None = None,
    ) -> int:
        """Record an event and, in the same transaction, its alert deliveries."""
        return record_event(txn, self.plan, kind, severity, payload, settlement_id)

    def _ask_gate(self, head: BlockHeader, finalized: int | None) -> GateResult | None:
        """Ask the finality gate about the settlements this head could make terminal
        (before the transaction: the gate may call other endpoints). None when trivial."""
        if self.gate.trivial:
            return None
        anchors = self.store.finality_anchors(self.name, head.number, finalized)
        return self.gate.approve(anchors, head) if anchors else GateResult(frozenset())

    def _apply_reorg(
        self, txn: BlockTxn, reorg: Reorg, new_head: BlockHeader
    ) -> tuple[set[str], set[str]]:
        """Undo inclusions above the common ancestor.

        Returns the ids it touched, and among them those whose terminal verdict lost its
        ground (to be re-decided under an explicit reversal)."""
        anc = reorg.common_ancestor
        txn.rewind(anc.number)
        touched = txn.anchored_above(anc.number)
        if reorg.beyond_window:
            # Recorded blocks below the window that the node no longer has (the tracker's
            # walk below the window found them replaced): what was anchored there is touched.
            gone = [b.old_hash for b in reorg.replaced if b.number <= anc.number]
            seen = {r.settlement_id for r in touched}
            touched += [r for r in txn.anchored_in(gone) if r.settlement_id not in seen]
        reversed_ids: set[str] = set()
        for rec in touched:
            txn.clear_anchor(rec)
            if rec.verdict == Verdict.FINALITY_CONFIRMED:
                reversed_ids.add(rec.settlement_id)
            elif rec.verdict == Verdict.SETTLEMENT_FAILED:
                # The failure stands (the caller may have discarded already), but the block
                # that proved it is gone: say so, so that someone can look.
                self._event(
                    txn,
                    "failure_evidence_reorged",
                    "warning",
                    {
                        "settlement_id": rec.settlement_id,
                        "tx_hash": rec.tx_hash,
                        "block_number": rec.block_number or rec.replaced_block_number,
                        "common_ancestor": anc.number,
                    },
                    rec.settlement_id,
                )
        violation = bool(reversed_ids)
        replaced = [
            {"number": b.number, "old_hash": b.old_hash, "new_hash": b.new_hash}
            for b in reorg.replaced
        ]
        reorg_id = txn.record_reorg(
            depth=reorg.depth,
            ancestor_number=anc.number,
            ancestor_hash=anc.hash,
            old_head_number=reorg.old_head.number,
            old_head_hash=reorg.old_head.hash,
            new_head_number=new_head.number,
            new_head_hash=new_head.hash,
            replaced=replaced,
            touched=[r.settlement_id for r in touched],
            finality_violation=violation,
        )
        payload = {
            "reorg_id": reorg_id,
            "chain": self.name,
            "depth": reorg.depth,
            "common_ancestor": {"number": anc.number, "hash": anc.hash},
            "replaced": replaced,
            "touched": [r.settlement_id for r in touched],
        }
        if reorg.beyond_window:
            # No block we followed survived: the ancestor is the node's block below our
            # window (a rebase) and the depth a lower bound.
            payload["beyond_window"] = True
        self._event(txn, "reorg", "critical" if violation else "warning", payload)
        self.plan.on_reorged_out(txn, touched, payload)
        log.warning(
            "chain %s: reorg of depth %d at ancestor %d (%s); %d watched settlements touched",
            self.name,
            reorg.depth,
            anc.number,
            anc.hash,
            len(touched),
        )
        self._reorg_reversal = Reversal(
            reason=f"reorg of depth {reorg.depth} past block {anc.number + 1}",
            evidence=Evidence.of("reorg", UnixMillis(txn.now), **payload),
        )
        return {r.settlement_id for r in touched}, reversed_ids

    _reorg_reversal: Reversal | None = None
    _started_once = False
    _probe_limit: int = 1_000_000
    untrusted_finalized: int | None = None
    """Our node's ``finalized`` height when the quorum gate did not trust it that far."""
    safe_number: int | None = None
    """The node's ``safe`` height (fetched only under the ``safe`` rule; not stored: it is
    fetched again after a restart)."""

    def _covered(self, finalized: int | None) -> int | None:
        """The highest tag height that can make a settlement final (``finalized``, or the
        ``safe`` tag under the ``safe`` rule): what the store's due and anchor queries and
        the gate are asked with."""
        if self.safe_number is None:
            return finalized
        return self.safe_number if finalized is None else max(finalized, self.safe_number)

    def _decide(
        self,
        txn: BlockTxn,
        rec: SettlementRecord,
        pos: ChainPosition,
        now: int,
        reversed_: bool,
        approval: GateResult | None = None,
    ) -> int:
        """Evaluate one settlement and store the outcome. Returns 1 if anything changed.

        ``approval`` is the finality gate's answer about it (default: the one asked before
        the current block's transaction)."""
        hold: str | None = None
        observed_by: tuple[str, ...] = ()
        if not self.gate.trivial:
            approval = approval or self._approval or GateResult(approved=frozenset())
            if rec.settlement_id not in approval.approved:
                hold = approval.waiting.get(
                    rec.settlement_id, "not yet checked against the other endpoints"
                )
            observed_by = approval.endpoints
        fresh = decide(rec, pos, self.policy, now, hold, observed_by)
        previous = decision_from_json(rec.decision)
        reversal = self._reorg_reversal if reversed_ else None
        transition = settle_transition(previous, fresh, reversal)
        kept = transition.decision
        terminal = kept.verdict.terminal
        late_horizon = rec.deadline + int(self.config.late_watch_s * 1000)
        watching = not terminal or (
            kept.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
            and transition.kind is not TransitionKind.LATE_FINALITY
            and now < late_horizon
        )
        if (
            transition.kind is TransitionKind.UNCHANGED
            and watching == rec.watching
            and _wait_reason(fresh) == _wait_reason(previous)
        ):
            return 0  # (a new reason to wait is stored: the settlement view shows it)
        if transition.kind is TransitionKind.HELD and watching == rec.watching:
            return 0
        subject = {"settlement_id": rec.settlement_id, "tx_hash": rec.tx_hash}
        became_terminal = store_decision(
            txn,
            rec,
            previous,
            fresh,
            transition,
            watching,
            self.plan,
            subject,
            f"chain {self.name}",
        )
        if (
            became_terminal
            and kept.verdict is Verdict.FINALITY_CONFIRMED
            and rec.block_number is not None
        ):
            self._confirmed_blocks.append(rec.block_number)
        return 1

    def _deadlines_despite(self, failure: ChainError) -> None:
        """Deadlines after a failed poll: a timeout is a matter of time, no RPC decides it, so
        a node that fails every poll (a method it lacks, an error it repeats) never holds a
        settlement past its deadline. Decided at the last processed head."""
        try:
            self._apply_deadlines()
        except StoreError as exc:
            log.warning(
                "chain %s: deadlines not applied after a failed poll (%s): %s",
                self.name,
                failure,
                exc,
            )

    def _apply_deadlines(self) -> int:
        """Time-only changes (timeouts, end of late watch) when no block arrived."""
        head = self.window.head
        if head is None:
            return 0
        now = self.clock()
        late_ms = int(self.config.late_watch_s * 1000)
        if not self.store.any_deadline_due(self.name, now, late_ms):
            return 0
        pos = ChainPosition(
            head.number, head.hash, self.finalized_number, safe_number=self.safe_number
        )
        decisions = 0
        self._confirmed_blocks = []
        with self.store.block_txn(self.name, now, self.fence) as txn:
            due = txn.due(head.number, self._covered(self.finalized_number), late_ms)
            for rec in due:
                decisions += self._decide(txn, rec, pos, now, False)
            changed = txn.by_ids([r.settlement_id for r in due])
        for rec in changed:
            self.index.update(rec)
        self._observe_confirmed(now)
        return decisions

    # -- probes --------------------------------------------------------------------------

    def _probe_approval(
        self,
        included: list[tuple[SettlementRecord, Any]],
        receipts: list[Any],
        deferred: set[str],
        head: BlockHeader | None,
    ) -> GateResult | None:
        """The gate's answer about txs a probe found in blocks already processed (asked
        before the transaction, as for a block): such a settlement may be deep enough at
        once, and the gate asked at the last block did not know it. Without this it would
        wait for the next block, for ever on a chain that went quiet."""
        if self.gate.trivial or head is None:
            return None
        anchors = [
            Anchor(
                settlement_id=rec.settlement_id,
                block_number=receipt.block_number,
                block_hash=receipt.block_hash,
                confirm_height=receipt.block_number + rec.required_confirmations - 1,
            )
            for (rec, _), receipt in zip(included, receipts, strict=True)
            if rec.settlement_id not in deferred
            and receipt is not None
            and receipt.block_number <= head.number
        ]
        return self.gate.approve(anchors, head) if anchors else None

    def _probe(self) -> int:
        """Look up watched txs by hash: all new ones, and a budget of still-unseen ones."""
        now = self.clock()
        elapsed_min = (now - self._reprobe_at) / 60_000 if self._reprobe_at else 0.0
        self._reprobe_at = now
        self._reprobe_tokens = min(
            float(self.reprobe_per_minute),
            self._reprobe_tokens + elapsed_min * self.reprobe_per_minute,
        )
        due = self.store.due_probes(self.name, now, min(self.probe_batch, self._probe_limit))
        fresh = [r for r in due if r.probe_count == 0]
        budget = int(self._reprobe_tokens)
        again = [r for r in due if r.probe_count > 0][:budget]
        self._reprobe_tokens -= len(again)
        return self._look_up(fresh + again, now)

    def _recheck_after_rebase(self) -> int:
        """After a reorg that replaced the whole window (a rebase), look every watched tx
        not included for us up by hash once: the new branch below the window is never
        scanned, and a tx may have been (re-)included there."""
        todo = self.store.unanchored_watching(self.name)
        return self._look_up(todo, self.clock(), by_receipt=True)

    def _look_up(self, todo: list[SettlementRecord], now: int, by_receipt: bool = False) -> int:
        """Look ``todo`` up by hash (batched): record sender and nonce, and inclusions in
        blocks already processed (then decide them at once). ``by_receipt``: ask every tx's
        receipt too, not only of those the node shows in a block (after a reorg a node may
        still show a re-included tx as pending, as anvil does)."""
        if not todo:
            return 0
        hashes = [r.tx_hash for r in todo]
        rebuilt: dict[str, str | None] = {}
        # One call per tx at most, one per block for receipts (watcher/probes.py).
        infos = self.client.transactions(hashes) if by_receipt else self._infos(todo, rebuilt)
        every = self.client.receipts(hashes) if by_receipt else [None] * len(todo)
        hits = [
            (r, i, receipt)
            for r, i, receipt in zip(todo, infos, every, strict=True)
            if i is not None and (i.block_number is not None or receipt is not None)
        ]
        included = [(r, i) for r, i, _ in hits]
        if by_receipt:
            receipts = [receipt for _, _, receipt in hits]
        else:
            by_hash = receipts_by_block(
                self.client,
                self.facts,
                [(r.tx_hash, i.block_hash) for r, i in included if i.block_hash is not None],
            )
            receipts = [by_hash.get(r.tx_hash) for r, _ in included]
        included_ids = {r.settlement_id for r, _ in included}
        # The signed bytes of a pending tx prove its sender and nonce later, after a
        # replacement has made it vanish from every node.
        pending = [
            r
            for r, i in zip(todo, infos, strict=True)
            if i and i.block_number is None and r.settlement_id not in included_ids
        ]
        if by_receipt:
            raws = dict(
                zip(
                    (r.settlement_id for r in pending),
                    self.client.raw_transactions([r.tx_hash for r in pending]) if pending else [],
                    strict=True,
                )
            )
        else:
            raws = {r.settlement_id: rebuilt.get(r.settlement_id) for r in pending}
        head = self.window.head
        # Included where we cannot judge it yet (no head before the first block is stored, or
        # no receipt yet at a height already processed): leave it untouched so the next poll
        # looks it up again. Recording its sender would end its probing for good, and block
        # scanning will never revisit a block at or below the head.
        deferred = {
            rec.settlement_id
            for (rec, info), receipt in zip(included, receipts, strict=True)
            if head is None or (receipt is None and (info.block_number or 0) <= head.number)
        }
        approval = self._probe_approval(included, receipts, deferred, head)
        found: list[str] = []
        self._confirmed_blocks = []
        with self.store.block_txn(self.name, now, self.fence) as txn:
            for rec, info in zip(todo, infos, strict=True):
                if rec.settlement_id in deferred:
                    continue
                if info is not None:
                    txn.set_sender(rec, info.sender, info.nonce, raws.get(rec.settlement_id))
                backoff = min(300_000, 5_000 * 2 ** min(rec.probe_count, 6))
                txn.set_probe(rec, now + backoff)
            for (rec, info), receipt in zip(included, receipts, strict=True):
                if rec.settlement_id in deferred:
                    continue
                if receipt is None or head is None or receipt.block_number > head.number:
                    continue  # not yet processed here: block scanning will find it
                held = self.window.get(receipt.block_number)
                if held is not None and held.hash != receipt.block_hash:
                    continue  # the node's receipt is on another branch: not included for us
                txn.set_inclusion(
                    rec,
                    receipt.block_number,
                    receipt.block_hash,
                    receipt.tx_index,
                    receipt.status,
                    info.sender,
                    info.nonce,
                )
                found.append(rec.settlement_id)
            if found and head is not None:
                # Included in a block processed before registration: decide now (it may
                # already be deep enough), not only when the next block arrives.
                pos = ChainPosition(
                    head.number, head.hash, self.finalized_number, safe_number=self.safe_number
                )
                for rec in txn.by_ids(found):
                    self._decide(txn, rec, pos, now, False, approval)
                self.plan.on_progress(txn, head.number, head.hash, set(found))
            changed = txn.by_ids([r.settlement_id for r in todo])
        for rec in changed:
            self.index.update(rec)
        self._observe_confirmed(now)
        return len(todo)

    def _infos(self, todo: list[SettlementRecord], rebuilt: dict[str, str | None]) -> list[Any]:
        """What the node says of each of ``todo`` (TxInfo or None), filling ``rebuilt`` with
        the signed bytes of pending ones. A registration that gave sender and nonce is not
        asked: it is found in the blocks the tracker holds, or left to block scanning."""
        asked = [r for r in todo if r.sender is None or r.nonce is None]
        looked = lookup(self.client, [r.tx_hash for r in asked])
        answers = dict(zip((r.settlement_id for r in asked), looked, strict=True))
        infos: list[Any] = []
        for r in todo:
            if r.settlement_id in answers:
                info, signed = answers[r.settlement_id]
                rebuilt[r.settlement_id] = signed
            else:
                assert r.sender is not None and r.nonce is not None
                info = located_info(self.facts, r.tx_hash, r.sender, r.nonce)
            infos.append(info)
        return infos

    # -- node health ---------------------------------------------------------------------

    def note_poll(self, error: str | None) -> None:
        """Track the node's health after a poll job; raise ``rpc_unhealthy`` once per period.

        A poll is bad when it failed (``error``) or the node lags behind the processed head
        (a node that went backwards). After :data:`UNHEALTHY_AFTER_POLLS` bad polls in a row
        one ``rpc_unhealthy`` event (critical) is stored, with its alert deliveries; the
        first good poll afterwards stores one ``rpc_recovered`` (info). A single blip
        raises nothing. If the store itself fails, the event is retried on the next poll.
        """
        now = self.clock()
        reason = error
        if reason is None and self.lagging:
            head = self.window.head
            reason = (
                f"node at {self.client.endpoint} is behind the processed head "
                f"{head.number if head else '?'} (lagging, or went backwards)"
            )
        if reason is None:
            self._bad_polls = 0
            self._bad_since = None
            if self._unhealthy_since is not None:
                payload = {
                    "chain": self.name,
                    "reason": f"node answers again after {now - self._unhealthy_since} ms",
                    "unhealthy_since": self._unhealthy_since,
                }
                if self._store_event("rpc_recovered", "info", payload):
                    self._unhealthy_since = None
            return
        self._bad_polls += 1
        if self._bad_since is None:
            self._bad_since = now
        if self._bad_polls < UNHEALTHY_AFTER_POLLS or self._unhealthy_since is not None:
            return
        payload = {
            "chain": self.name,
            "endpoint": self.client.endpoint,
            "reason": reason,
            "failed_polls": self._bad_polls,
            "since": self._bad_since,
            "head_number": self.head.number if self.head else None,
        }
        if self._store_event("rpc_unhealthy", "critical", payload):
            self._unhealthy_since = self._bad_since
            log.error("chain %s: node unhealthy: %s", self.name, reason)

    def endpoint_problem(self, endpoint: str, reason: str) -> bool:
        """Store one ``rpc_unhealthy`` event about one endpoint (e.g. it answered another
        chain id at start-up) while the chain runs on the others; False if the store failed."""
        payload = {"chain": self.name, "endpoint": endpoint, "reason": reason}
        return self._store_event("rpc_unhealthy", "critical", payload)

    def endpoint_event(
        self, kind: str, severity: str, endpoint: str, state: str, reason: str
    ) -> bool:
        """Store one event about one endpoint's health change (``rpc_unhealthy`` or
        ``rpc_recovered``, see :mod:`watcher.engine.endpoint_alerts`); False if the store failed."""
        payload = {"chain": self.name, "endpoint": endpoint, "state": state, "reason": reason}
        return self._store_event(kind, severity, payload)

    def _store_event(self, kind: str, severity: str, payload: dict[str, Any]) -> bool:
        """Store one event (and its alerts) in its own transaction; False if the store failed."""
        try:
            with self.store.block_txn(self.name, self.clock(), self.fence) as txn:
                self._event(txn, kind, severity, payload)
        except StoreError as exc:
            log.warning("chain %s: cannot store %s event: %s", self.name, kind, exc)
            return False
        return True


def _wait_reason(decision: Decision) -> str | None:
    """Why an awaiting decision waits although its block looks final (the quorum gate's
    hold, or a ``finalized`` tag not trusted), else None."""
    evidence = decision.evidence
    if evidence is None:
        return None
    facts = dict(evidence.facts)
    reason = facts.get("reason") if evidence.kind == "awaiting_quorum" else None
    reason = reason or facts.get("waiting")
    return str(reason) if reason is not None else None


class ChainInconsistentReceipts(ChainError):
    """A block lists a watched tx but the node returned no receipt for it: retry the block."""

    def __init__(self, chain: str, number: int, missing: list[str]) -> None:
        super().__init__(
            f"{chain}: block {number} lists {len(missing)} watched tx(s) without receipts "
            f"(first {missing[0]}); treating them as not yet included and retrying"
        )
