"""Each chain's poll job: start-up check, catch-up within a time slice, health.

Start-up checks every endpoint's ``eth_chainId`` against the config: the chain starts when
at least ``quorum`` endpoints serve it (the others are marked ``wrong_chain`` and reported),
and is refused when too few can. A chain whose node is down at start-up is not fatal: its
job keeps trying, ``/healthz`` says so, and nothing is decided for that chain meanwhile.
A chain's ``calls_per_minute`` budget stretches its poll interval when needed.

The runner is handed what it uses (the chains' clients, engines, budgets and locks, the
lease answers, the clock, the hooks run after a poll) by :func:`watcher.app.build.build`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from chains import pool
from chains.budget import CallBudget
from chains.errors import ChainError, ChainIdMismatch, NodeDataInvalid
from chains.health import redact
from chains.rpc import RpcClient
from watcher.app.status import ChainStatus, PollHealth, StatusBoard, budget_json, status_of
from watcher.clock import Clock
from watcher.config.chains import ChainConfig
from watcher.engine.chain_watcher import ChainWatcher
from watcher.store import StaleFencingToken, StoreError

log = logging.getLogger("finality.service")

CATCH_UP_SLICE_S = 5.0
"""Longest one poll job keeps catching up before yielding to the next run."""


class ChainRunner:
    """Polls the configured chains, one job per chain, each under its own lock."""

    def __init__(
        self,
        chains: Sequence[ChainConfig],
        clients: Mapping[str, RpcClient],
        watchers: Mapping[str, ChainWatcher],
        budgets: Mapping[str, CallBudget],
        locks: Mapping[str, threading.Lock],
        owns: Callable[[str], bool],
        lost: Callable[[str, int], None],
        clock: Clock,
        stopping: threading.Event,
        after_poll: Sequence[Callable[[str], None]],
    ) -> None:
        """``owns``/``lost`` are the handoff manager's answers (a chain another instance
        holds is not polled; a refused write gives the lease up); ``after_poll`` are the
        components' hooks, run in order in the poll thread after each successful poll; a
        catching-up poll yields at once when ``stopping`` is set (SIGTERM)."""
        self.configs = {c.name: c for c in chains}
        self.clients = clients
        self.watchers = watchers
        self.budgets = budgets
        self.locks = locks
        self.owns = owns
        self.lost = lost
        self.clock = clock
        self.stopping = stopping
        self.after_poll = list(after_poll)
        self.health = {name: PollHealth() for name in self.configs}
        self.board = StatusBoard(self.configs)
        """What the API shows of each chain: published after every poll job (app/status.py)."""
        self._wrong_chain: dict[str, list[pool.ChainIdAnswer]] = {}

    # -- start-up ------------------------------------------------------------------------

    def check(self, chain: ChainConfig) -> None:
        """Ask every endpoint its ``eth_chainId``: the chain may start when ``quorum`` of them
        (at least one) serve ``chain_id``; those serving another chain are marked
        ``wrong_chain`` and logged. Raises :class:`ChainIdMismatch` (naming what each endpoint
        answered) when too few can, or a :class:`ChainError` when too few answered yet."""
        answers = pool.check_chain_ids(
            self.clients[chain.name], chain.name, chain.chain_id, chain.quorum
        )
        wrong = [a for a in answers if a.chain_id is not None and a.chain_id != chain.chain_id]
        for a in wrong:
            log.error(
                "chain %s: endpoint %s serves chain id %d, not %d: marked wrong_chain, "
                "not used; the chain runs on the others",
                chain.name,
                redact(a.endpoint),
                a.chain_id,
                chain.chain_id,
            )
        self._wrong_chain[chain.name] = wrong

    def start(self, name: str) -> None:
        """Check the node and load the chain's state; raises on a chain id mismatch."""
        chain = self.configs[name]
        self.check(chain)
        watcher = self.watchers[name]
        watcher.start()
        self.health[name].started = True
        self.publish(name)
        for a in self._wrong_chain.pop(name, []):
            watcher.endpoint_problem(
                redact(a.endpoint),
                f"serves chain id {a.chain_id}, not {chain.chain_id}: not used",
            )

    # -- the poll job --------------------------------------------------------------------

    def poll(self, name: str) -> int | None:
        """One scheduler run for a chain: poll, and keep catching up for a bounded time;
        returns the new blocks it found (None: not polled, or failed)."""
        if not self.owns(name):
            return None  # another instance holds the chain's lease; the lease job may take it
        with self.locks[name]:
            try:
                return self._poll_started(name)
            except StaleFencingToken as exc:
                # Another instance took the chain over while this one was paused: the store
                # refused the write (and recorded it); stop processing the chain.
                log.warning("%s", exc)
                self.lost(name, exc.token)
            except ChainIdMismatch as exc:
                self._failed(name, exc)
                log.error("%s", exc)
            except (ChainError, StoreError) as exc:
                self._failed(name, exc)
                errors = self.health[name].consecutive_errors
                if errors in (1, 10) or errors % 100 == 0:
                    log.warning("chain %s: %s (error #%d)", name, exc, errors)
        return None

    def _poll_started(self, name: str) -> int | None:
        """Start the chain if needed, poll it, catch up (each round planned within the
        budget like any poll: one that does not fit ends the catch-up), run the hooks;
        returns the new blocks (None: the budget skipped the poll)."""
        health = self.health[name]
        if not health.started:
            self.start(name)
        watcher = self.watchers[name]
        started = time.monotonic()
        decided = partial(self._after_poll, name)  # before the round's look-ups
        stats = watcher.poll(decided)
        blocks = stats.blocks
        while (
            stats.behind > 0
            and stats.skipped is None
            and time.monotonic() - started < CATCH_UP_SLICE_S
            and not self.stopping.is_set()
        ):
            stats = watcher.poll(decided)
            blocks += stats.blocks
        health.last_success_ms = self.clock()
        health.last_error = None
        health.consecutive_errors = 0
        watcher.note_poll(None)  # rpc_unhealthy / rpc_recovered, once per period
        self.publish(name)
        self._after_poll(name)
        return None if stats.skipped is not None and blocks == 0 else blocks

    def _after_poll(self, name: str) -> None:
        """Run the hooks: after the poll, and as soon as a round's blocks decided something
        (before its look-ups, and before the next round of a catch-up), so a verdict's
        receipt is built (and its commit sent) while the rest of the poll runs rather than
        after the whole catch-up slice (a round that finds another block mined meanwhile,
        as at W = 1,000 where a poll is slow, used to hold a block's hundred verdicts back
        from the receipts thread)."""
        for hook in self.after_poll:
            hook(name)

    def _failed(self, name: str, exc: Exception) -> None:
        """Record a failed poll (a node's failure also counts towards ``rpc_unhealthy``)."""
        health = self.health[name]
        health.last_error = str(exc)
        health.consecutive_errors += 1
        if isinstance(exc, ChainError):
            # Data that failed a check, from the chain's only endpoint: said at once (with
            # several, the failover reads on and the endpoint's own alert says it).
            lied = isinstance(exc, NodeDataInvalid)
            alone = pool.health_report(self.clients[name]) is None
            self.watchers[name].note_poll(str(exc), at_once=lied and alone)
        self.publish(name)

    def failed_start(self, name: str, exc: ChainError) -> None:
        """Record that the chain's node could not be reached at start-up (its poll job keeps
        trying): ``/healthz`` says why at once."""
        self.health[name].last_error = str(exc)
        self.publish(name)

    def publish(self, name: str) -> None:
        """Put the chain's snapshot on the board (in its poll thread, under its lock)."""
        self.board.publish(self.status(name))

    def status(self, name: str) -> ChainStatus:
        """The chain's snapshot now (what the next publish would put on the board)."""
        health = self.health[name]
        return status_of(name, self.watchers[name], health, self.poll_interval_s(name))

    # -- what the API reports ------------------------------------------------------------

    def healthy(self, name: str) -> bool:
        """A chain is healthy when its last poll succeeded recently; a standby (another
        instance holds the chain's lease) is healthy: it is ready to take over."""
        return self.board.get(name).healthy(self.clock(), standby=not self.owns(name))

    def poll_interval_s(self, name: str) -> float:
        """The chain's poll interval, stretched when its budget cannot pay one call per poll."""
        interval = self.configs[name].resolved_poll_interval_s
        budget = self.budgets.get(name)
        return budget.interval_s(interval) if budget is not None else interval

    def budget_status(self, name: str) -> dict[str, object] | None:
        """The chain's budget and spend, and why polls wait if they do (GET /v1/chains)."""
        return budget_json(self.budgets.get(name), self.status(name))
