"""One chain's blocks through the engine: fetch, apply in one transaction, move memory.

:class:`BlockPipeline` is the part of a poll after the tracker answered: for each new
block (or a reorg seen without one) it fetches the block's input
(:func:`~watcher.engine.fetch.fetch_block`), applies it in the block's store transaction
(:func:`~watcher.engine.apply.apply_block`) and then moves memory
(:meth:`~watcher.engine.memory.ChainMemory.after_commit`); a catch-up's blocks share a
transaction in runs (:func:`~watcher.engine.apply.apply_run`). With no new block it applies
deadlines through the same :func:`~watcher.engine.apply.apply_block` (a timeout is a matter
of time, not blocks: a quiet chain or a failing node holds no settlement past its
deadline). Look-ups by hash end the same way (:meth:`BlockPipeline.looked_up`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from chains.errors import ChainError
from chains.models import Block
from chains.tracker import Advance, Reorg
from watcher import otel_tracing
from watcher.clock import Clock
from watcher.config.chains import ChainConfig
from watcher.engine.apply import apply_block, apply_run
from watcher.engine.fetch import ChainSource, PollView, deadline_input, fetch_block, fetch_run
from watcher.engine.lookups import LookupOutcome, TxLookups
from watcher.engine.memory import ChainMemory
from watcher.engine.payments_fetch import fetch_transfer_logs
from watcher.engine.rules import ChainRules
from watcher.engine.tags import fetch_tags
from watcher.engine.values import BlockInput, BlockOutcome
from watcher.metrics import Buckets
from watcher.store.errors import StoreError

log = logging.getLogger("finality.engine")

FINALITY_SECONDS_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0, 1800.0, 3600.0)
"""Buckets of the inclusion → finality time histogram (seconds)."""

FenceOf = Callable[[str], "tuple[str, int] | None"]
"""(owner, fencing token) every write of a chain carries, asked per transaction; None
when this instance runs alone (SQLite)."""


RUN_BLOCKS = 500
"""Blocks of a catch-up committed in one transaction at most (those with watched txs too):
a catch-up after downtime pays one commit per run instead of one per block, and the writer
lock is never held for long (the API keeps answering). Each run also pays a fixed part (its
receipts batch, its header window written, what is due asked at its start, memory moved,
the commit): 200 a run made that a tenth of a 10,000-block catch-up's CPU; a run of 500
holds the lock about 0.1 s on a quiet machine (bench/README.md, catch-up)."""


def unfenced(_name: str) -> tuple[str, int] | None:
    """No fencing token: this instance runs alone."""
    return None


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


class BlockPipeline:
    """The per-block part of one chain's engine (see the module doc)."""

    def __init__(
        self,
        config: ChainConfig,
        source: ChainSource,
        memory: ChainMemory,
        lookups: TxLookups,
        clock: Clock,
        fence_of: FenceOf,
        rules_of: Callable[[], ChainRules],
    ) -> None:
        self.config = config
        self.name = config.name
        self.source = source
        self.store = source.store
        self.memory = memory
        self.lookups = lookups
        self.clock = clock
        self.fence_of = fence_of
        self.rules_of = rules_of
        """The rules of the next transaction (read each time: alert routes may change)."""
        self.finality_seconds = Buckets(FINALITY_SECONDS_BUCKETS)
        """Time from the inclusion block's timestamp to the stored FINALITY_CONFIRMED."""

    def probe(self, max_probes: int, max_batch: int | None) -> int:
        """Look watched txs up by hash (:mod:`watcher.engine.lookups`), within the limits."""
        now = self.clock()
        outcome = self.lookups.probe(self.memory, self.rules_of(), now, max_probes, max_batch)
        return self.looked_up(outcome)

    def advance(self, stats: PollStats, advance: Advance) -> bool:
        """Commit what the tracker found (a transaction per block); with no new block, apply
        deadlines. Returns whether deadlines were applied."""
        stats.lagging = advance.lagging
        stats.behind = advance.behind
        memory = self.memory
        last = memory.tags
        tags = (
            fetch_tags(
                self.source.client,
                self.source.gate,
                self.config.resolved_finality,
                memory.watched,
                advance.node_head.number,
                last,
            )
            if advance.blocks
            else replace(last, finalized=last.known_finalized)
        )
        watches = (memory.payments, memory.subscriptions)
        blocks, transfers = fetch_transfer_logs(  # eth_getLogs, for tokens
            self.name, self.store, self.source.client, watches, advance.blocks, advance.reorg
        )
        stats.behind += len(advance.blocks) - len(blocks)  # a node capping eth_getLogs' range
        view = PollView(tags, advance.node_head, transfers)
        stats.decisions += self._commit_blocks(view, blocks, advance.reorg)
        stats.blocks += len(blocks)
        if advance.reorg is not None and not advance.blocks:
            stats.decisions += self._commit(view, None, advance.reorg)
        stats.reorg = advance.reorg
        if advance.reorg is not None and advance.reorg.beyond_window:
            outcome = self.lookups.recheck_after_rebase(memory, self.rules_of(), self.clock())
            stats.probes += self.looked_up(outcome)
        if advance.blocks:
            return False
        stats.decisions += self.apply_deadlines()
        return True

    def _commit_blocks(self, view: PollView, blocks: Sequence[Block], reorg: Reorg | None) -> int:
        """The poll's blocks in order, in runs of up to :data:`RUN_BLOCKS` sharing one
        transaction (:meth:`_applied_run`: a catch-up after downtime), except a block that
        must see the blocks before it committed (:meth:`_alone`): each block of a run is
        still applied, in order, as it would be alone; only the commit is shared. Returns
        the decisions that changed something."""
        decisions = 0
        run: list[Block] = []
        last = blocks[-1].header.number if blocks else None
        for i, block in enumerate(blocks):
            first_reorg = reorg if i == 0 else None
            if first_reorg is None and not self._alone():
                run.append(block)
                if len(run) == RUN_BLOCKS:
                    decisions += self._applied_run(view, run, last)
                    run = []
                continue
            decisions += self._applied_run(view, run, last)
            run = []
            decisions += self._commit(view, block, first_reorg)  # memory moved past the run
        return decisions + self._applied_run(view, run, last)

    def _alone(self) -> bool:
        """Whether each block needs its own transaction, its input fetched after the block
        before it committed: a payment or a subscription watched (a block's transfers
        count against what the earlier ones paid) or a quorum gate (its answer reads the
        store's anchors). Otherwise a block's input needs memory only for matching its
        txs, and memory from before the run holds every settlement the run may concern
        (never fewer): what the run's earlier blocks change is applied as memory would
        have matched it (:func:`~watcher.engine.apply.apply_run`)."""
        return self.memory.watching_transfers or not self.source.gate.trivial

    def _applied_run(self, view: PollView, run: list[Block], poll_last: int | None) -> int:
        """Blocks fetched together (their receipts in one batch), applied in one
        transaction, then memory moved per block (``poll_last``: the poll's last block,
        whose header window alone needs compact headers: :func:`fetch_run`)."""
        if not run:
            return 0
        attributes: dict[str, str | int] = {
            "finality.chain": self.name,
            "finality.block": run[-1].header.number,
            "finality.blocks": len(run),
        }
        with otel_tracing.span("finality.block_commit", attributes):
            inputs = fetch_run(self.source, self.memory, view, run, self.clock(), poll_last)
            rules = self.rules_of()
            with self.store.block_txn(self.name, inputs[0].now, self.fence_of(self.name)) as txn:
                outcomes = apply_run(txn, inputs, rules)
        decisions = 0
        for inp, outcome in zip(inputs, outcomes, strict=True):
            decisions += self._moved(inp, outcome)
        return decisions

    def _commit(self, view: PollView, block: Block | None, reorg: Reorg | None) -> int:
        """One block (or a reorg seen without one): fetch, apply in its transaction, move
        memory. Returns the decisions that changed something."""
        at = block.header if block is not None else (reorg.common_ancestor if reorg else None)
        attributes = {"finality.chain": self.name, "finality.block": at.number if at else -1}
        with otel_tracing.span("finality.block_commit", attributes):
            now = self.clock()
            return self._applied(fetch_block(self.source, self.memory, view, block, reorg, now))

    def _applied(self, inp: BlockInput) -> int:
        """``inp`` applied in one transaction, then memory moved; returns the decisions."""
        with self.store.block_txn(self.name, inp.now, self.fence_of(self.name)) as txn:
            outcome: BlockOutcome = apply_block(txn, inp, self.rules_of())
        return self._moved(inp, outcome)

    def _moved(self, inp: BlockInput, outcome: BlockOutcome) -> int:
        """After the commit: memory moved to match the store; returns the decisions."""
        self.memory.reindex_payments(self.memory.after_commit(outcome))
        self._observe_confirmed(outcome.confirmed_blocks, inp.now)
        return outcome.decisions

    def looked_up(self, outcome: LookupOutcome) -> int:
        """Move memory after a committed look-up; returns how many were looked up."""
        self.memory.updated(outcome.records, outcome.tags)
        self._observe_confirmed(outcome.confirmed_blocks, self.clock())
        return outcome.looked_up

    def deadlines_despite(self, failure: ChainError) -> None:
        """Deadlines after a failed poll (logged, not raised, if the store fails too)."""
        try:
            self.apply_deadlines()
        except StoreError as exc:
            log.warning(
                "chain %s: deadlines not applied after a failed poll (%s): %s",
                self.name,
                failure,
                exc,
            )

    def apply_deadlines(self) -> int:
        """Time-only changes (timeouts, end of late watch) when no block arrived: a
        timeout is a matter of time, not blocks, so a quiet chain or a failing node holds
        no settlement past its deadline. Decided at the last processed head."""
        now = self.clock()
        inp = deadline_input(self.memory, now)
        late_ms = self.rules_of().late_watch_ms
        if inp is None or not self.store.any_deadline_due(self.name, now, late_ms):
            return 0
        return self._applied(inp)

    def _observe_confirmed(self, blocks: tuple[int, ...], now: int) -> None:
        """Feed the inclusion → finality histogram with what a transaction confirmed."""
        for number in blocks:
            header = self.memory.window.get(number)
            if header is not None:
                self.finality_seconds.observe(max(0.0, now / 1000 - header.timestamp))
