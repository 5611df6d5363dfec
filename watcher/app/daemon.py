"""The built daemon: its parts, the scheduler jobs, start and stop (``finality run``).

:func:`watcher.app.build.build` makes an :class:`App`; nothing in it is replaced or wired
afterwards. :meth:`App.run` serves the HTTP API it is given in the foreground (the API sits
above this package and is never imported here) and polls in the background: one job per
chain (:mod:`watcher.app.chains`), the lease job (handoff check, then the webhook inbox of
the sources this instance owns), and the components' own threads.

SIGTERM or SIGINT stop the API, let a running poll finish its block (each block is one
store transaction, so there is nothing half-done to undo), and log a one-line summary.
"""

from __future__ import annotations

import faulthandler
import gc
import logging
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import uvicorn
from apscheduler.schedulers.background import BackgroundScheduler
from starlette.types import ASGIApp

from chains.budget import CallBudget
from chains.errors import ChainError, ChainIdMismatch
from chains.rpc import RpcClient
from watcher.app.chains import ChainRunner
from watcher.app.listen import ApiPortBusy, bind_api
from watcher.app.pacing import PollPacing, poll_job_id
from watcher.app.status import PollHealth, StatusBoard
from watcher.clock import Clock
from watcher.components import Component
from watcher.config.chains import ChainConfig
from watcher.config.model import Config
from watcher.delivery.plan import OutboxPlan
from watcher.delivery.sender import Sender
from watcher.engine.chain_watcher import ChainWatcher
from watcher.engine.heads import HeadsWaker
from watcher.handoff.manager import HandoffManager
from watcher.receipts.component import ReceiptIssuer
from watcher.sources.inbox import WebhookInbox
from watcher.sources.poller import SourcePoller
from watcher.store import Store, StoreError
from watcher.store.instance_lock import InstanceLock
from watcher.workflows.service import WorkflowService

log = logging.getLogger("finality.service")


def _dump_stacks(signum: int, frame: object) -> None:
    """Every thread's stack to stderr (``kill -USR1``), the interpreter held meanwhile."""
    del signum, frame
    faulthandler.dump_traceback(all_threads=True)


KEEP_ALIVE_S = 75
"""How long the API keeps an idle connection open (nginx's default): above the idle expiry of
the clients that pool connections (httpx 5 s, aiohttp 15 s), so they, not the server, close
an idle one, and never race a closing connection with a request."""


@dataclass(frozen=True)
class App:
    """Everything the daemon runs, as :func:`watcher.app.build.build` made it."""

    config: Config
    store: Store
    clock: Clock
    clients: Mapping[str, RpcClient]
    live_clients: Mapping[str, RpcClient]
    """Each chain's client for live look-ups of unregistered txs: the engine's, or for a
    chain with a call budget one of its own that never spends it."""
    budgets: Mapping[str, CallBudget]
    """Each budgeted chain's calls-per-minute budget."""
    watchers: Mapping[str, ChainWatcher]
    chains: ChainRunner
    pacing: PollPacing
    """Moves each polled chain's next poll to just after its next block (watcher/app/pacing)."""
    handoff: HandoffManager
    scheduler: BackgroundScheduler
    stopping: threading.Event
    """Set on SIGTERM: a catching-up poll yields at once, so the lease goes quickly."""
    receipts: ReceiptIssuer
    senders: Sequence[Sender]
    sources: SourcePoller | None
    """The off-chain sources component (None without ``[[sources]]``)."""
    inbox: WebhookInbox | None
    """The sources' webhook inbox (None without ``[[sources]]``)."""
    heads: HeadsWaker | None
    """The WebSocket new-heads component (None when every chain polls)."""
    components: Sequence[Component]
    """Every component, in start order."""
    workflows: WorkflowService
    """Callers' workflows under the handoff guard (``/v1/workflows``)."""
    plan: OutboxPlan
    """The alert routes every decision writer shares (an operator's acceptance records one)."""
    started_at: int
    instance_lock: InstanceLock | None = None
    """This daemon's hold on its SQLite store (None on PostgreSQL), freed when it stops."""

    # -- chains (see watcher.app.chains) -------------------------------------------------

    @property
    def health(self) -> Mapping[str, PollHealth]:
        """Each chain's poll health."""
        return self.chains.health

    @property
    def board(self) -> StatusBoard:
        """Each chain's snapshot as of its last poll job: all the API may know of a chain."""
        return self.chains.board

    def chain_config(self, name: str) -> ChainConfig:
        """Config of a chain; raises ``UnknownChainName`` listing the configured ones."""
        return self.config.chain(name)

    def check_chain(self, chain: ChainConfig) -> None:
        """The start-up ``eth_chainId`` check of ``chain`` (:meth:`ChainRunner.check`)."""
        self.chains.check(chain)

    def start_chain(self, name: str) -> None:
        """Check the node and load the chain's state; raises on a chain id mismatch."""
        self.chains.start(name)

    def poll_chain(self, name: str) -> None:
        """One scheduler run for a chain: poll, and keep catching up for a bounded time;
        then its next run is paced by what the poll found."""
        at = self.clock()
        self.pacing.after_poll(name, at, self.chains.poll(name))

    def healthy(self, name: str) -> bool:
        """Whether the chain polled successfully of late (a standby counts as healthy)."""
        return self.chains.healthy(name)

    def poll_interval_s(self, name: str) -> float:
        """The chain's poll interval, stretched when its budget cannot pay one call per poll."""
        return self.chains.poll_interval_s(name)

    def budget_status(self, name: str) -> dict[str, object] | None:
        """The chain's budget and spend, and why polls wait if they do (GET /v1/chains)."""
        return self.chains.budget_status(name)

    # -- running -------------------------------------------------------------------------

    def check_leases(self) -> None:
        """The lease job: take and give leases, then apply the webhook inbox of the sources
        this instance owns (events a standby stored). Never raises for store trouble."""
        self.handoff.tick()
        if self.inbox is None or self.handoff.released:
            return
        try:
            self.inbox.apply_owned()
        except StoreError as exc:
            log.warning("after the lease check: %s", exc)

    def start_polling(self) -> None:
        """Take the leases that are free, then start the lease keeper (a thread of its own:
        renewals never wait for the scheduler's pool or a chain lock), the lease job (takes
        and gives leases away) and one polling job per chain, first run now (on SQLite this
        instance owns everything)."""
        self.check_leases()
        self.handoff.start_keeper()
        if self.handoff.enabled:
            self.scheduler.add_job(
                self.check_leases,
                "interval",
                seconds=self.handoff.tick_s,
                id="handoff:leases",
                max_instances=1,
                coalesce=True,
                misfire_grace_time=None,
            )
        for chain in self.config.chains:
            self.add_poll_job(chain)
        self.scheduler.start()
        for component in self.components:
            component.start()

    def add_poll_job(self, chain: ChainConfig) -> None:
        """The chain's interval job (first run now), at its budget's pace if slower."""
        interval = self.poll_interval_s(chain.name)
        if interval > chain.resolved_poll_interval_s:
            log.warning(
                "chain %s: budget %d calls/min < %g polls/min: polling every %.1f s",
                chain.name,
                self.budgets[chain.name].limit,
                60 / chain.resolved_poll_interval_s,
                interval,
            )
        self.scheduler.add_job(
            self.poll_chain,
            "interval",
            seconds=interval,
            args=[chain.name],
            id=poll_job_id(chain.name),
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
            next_run_time=datetime.now(UTC),
        )

    def stop(self) -> None:
        """Stop polling (waiting for a running poll to finish its block; the keeper renews
        the leases meanwhile), stop the keeper and release the leases so a standby takes
        over at once, stop the components and close the store."""
        self.stopping.set()
        self.pacing.close()  # before the shutdown: a poll ending now must not wait on it
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)
        self.handoff.release_all()
        for component in reversed(self.components):
            component.stop()
        counts = self.store.verdict_counts()
        summary = ", ".join(
            f"{chain}/{verdict}={n}" for (chain, verdict), n in sorted(counts.items())
        )
        log.info(
            "stopped after %.1f s; settlements: %s",
            (self.clock() - self.started_at) / 1000,
            summary or "none",
        )
        self.close()

    def close(self) -> None:
        """Close the store, then free the SQLite store's lock for the next daemon."""
        self.store.close()
        if self.instance_lock is not None:
            self.instance_lock.release()

    def start_chains(self) -> None:
        """Start every chain before serving: a chain id mismatch is fatal (the store is
        closed), a node not reachable yet is not (its poll job keeps trying)."""
        for chain in self.config.chains:
            try:
                self.start_chain(chain.name)
            except ChainIdMismatch:
                self.close()
                raise
            except ChainError as exc:
                self.chains.failed_start(chain.name, exc)
                log.warning(
                    "chain %s: node not reachable at start-up, will keep trying: %s",
                    chain.name,
                    exc,
                )

    def run(self, create_app: Callable[[App], ASGIApp]) -> None:
        """Run until SIGTERM/SIGINT: the API ``create_app`` builds over this daemon in the
        foreground, polling in the background. The HTTP side is passed in (watcher/cli
        gives ``watcher.api``'s): the wiring point never imports the API, which sits above.

        The API's port is bound first (:class:`~watcher.app.listen.ApiPortBusy` if it
        cannot be, the store closed): nothing starts or is announced before it is held."""
        try:
            sock = bind_api(self.config.api.host, self.config.api.port)
        except ApiPortBusy:
            self.close()
            raise
        try:
            self.start_chains()
        except BaseException:
            sock.close()
            raise
        # `kill -USR1 <pid>` writes every thread's stack to stderr (the log): where a daemon
        # that seems stuck is, without stopping it (the tests ask for it when a wait fails).
        # Written from a Python handler, which holds the interpreter: faulthandler's own
        # handler reads the other threads' frames while they run, and a daemon busy in a
        # poll died of it (SIGSEGV) in a test.
        signal.signal(signal.SIGUSR1, _dump_stacks)
        server = _Server(self.stopping, self._server_config(create_app(self)))
        # What start-up built (modules, config, the application, the watch index) lives as
        # long as the process: frozen out of the collector, so its full passes under load do
        # not walk it again and again (bench/README.md "API under load").
        gc.collect()
        gc.freeze()
        self.start_polling()
        log.info(
            "finality watcher: API on http://%s:%d (docs at /docs), chains: %s, store: %s",
            self.config.api.host,
            self.config.api.port,
            ", ".join(c.name for c in self.config.chains),
            self.config.store.url,
        )
        # uvicorn handles SIGTERM/SIGINT itself and re-raises the signal once it has shut
        # down; a Python handler here turns that re-raise into a no-op, so that the
        # scheduler is stopped and the summary logged instead of the process dying first.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: None)
        try:
            server.run(sockets=[sock])
        finally:
            self.stop()

    def _server_config(self, app: ASGIApp) -> uvicorn.Config:
        return uvicorn.Config(
            app,
            host=self.config.api.host,
            port=self.config.api.port,
            log_config=None,
            access_log=False,
            lifespan="off",
            # httptools and uvloop (both pinned): about twice h11's request rate on asyncio's
            # loop, for the same answers (bench/api_load.py).
            http="httptools",
            loop="uvloop",
            # Open SSE streams would otherwise hold a SIGTERM for their full timeout;
            # clients resume with Last-Event-ID.
            timeout_graceful_shutdown=2,
            # Longer than the clients' own idle expiry (httpx: 5 s, the same as uvicorn's
            # default): with equal timers a client sent its next request on a connection
            # the server was closing, and got "Server disconnected without sending a
            # response" (seen at 1 in 4 runs of bench.receipts_cost's registrations).
            timeout_keep_alive=KEEP_ALIVE_S,
        )


class _Server(uvicorn.Server):
    """uvicorn's server, also telling the pollers at once that a shutdown began."""

    def __init__(self, stopping: threading.Event, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._stopping = stopping

    def handle_exit(self, sig: int, frame: object) -> None:
        self._stopping.set()
        super().handle_exit(sig, frame)  # type: ignore[arg-type]
