"""The daemon: one polling job per chain (APScheduler) and the HTTP API (uvicorn).

Start-up checks every endpoint's ``eth_chainId`` against the config: the chain starts when
at least ``quorum`` endpoints serve it (the others are marked ``wrong_chain`` and reported),
and is refused when too few can. A chain's ``calls_per_minute`` budget stretches its poll
interval when needed and its engine plans each poll within it (chains.budget).
A chain whose node is down at start-up is not fatal: its job keeps trying, ``/healthz``
says so, and nothing is decided for that chain meanwhile (the watcher waits, and says why).

SIGTERM or SIGINT stop the API, let a running poll finish its block (each block is one
store transaction, so there is nothing half-done to undo), and log a one-line summary.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn
from apscheduler.schedulers.background import BackgroundScheduler
from starlette.types import ASGIApp

from chains import pool
from chains.budget import CallBudget
from chains.errors import ChainError, ChainIdMismatch
from chains.health import redact
from chains.rpc import RpcClient
from watcher.clock import Clock, wall_clock_ms
from watcher.components import Component
from watcher.config.chains import ChainConfig
from watcher.config.model import Config
from watcher.delivery.plan import OutboxPlan
from watcher.engine.chain_watcher import ChainWatcher
from watcher.engine.disagreement import event_recorder
from watcher.handoff.manager import HandoffManager, default_instance_id
from watcher.sources.inbox import WebhookInbox
from watcher.sources.poller import SourcePoller
from watcher.store import StaleFencingToken, Store, StoreError

log = logging.getLogger("finality.service")

CATCH_UP_SLICE_S = 5.0
"""Longest one poll job keeps catching up before yielding to the next run."""


@dataclass
class ChainHealth:
    """What ``/healthz`` and ``/v1/chains`` say about one chain."""

    last_success_ms: int | None = None
    last_error: str | None = None
    consecutive_errors: int = 0
    started: bool = False


class Service:
    """Everything the daemon runs, built from a :class:`Config`."""

    def __init__(
        self,
        config: Config,
        clock: Clock = wall_clock_ms,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.clock = clock
        self.store = Store.open(config.store.url)
        self.clients: dict[str, RpcClient] = {}
        self.budgets: dict[str, CallBudget] = {}
        """Each budgeted chain's calls-per-minute budget (``monotonic`` is its clock)."""
        self._wrong_chain: dict[str, list[pool.ChainIdAnswer]] = {}
        self.watchers: dict[str, ChainWatcher] = {}
        self.health: dict[str, ChainHealth] = {}
        self._locks: dict[str, threading.Lock] = {}
        for chain in config.chains:
            budget = None
            if chain.calls_per_minute is not None:
                budget = CallBudget(chain.calls_per_minute, clock=monotonic)
                self.budgets[chain.name] = budget
            client = pool.client_for(
                chain.rpc,
                chain_id=chain.chain_id,
                weights=chain.rpc_weights,
                timeout_s=chain.rpc_timeout_s,
                base_backoff_s=chain.rpc_backoff_s,
                budget=budget,
                rate_limits=chain.rpc_rate_limits,
                stall_s=pool.stall_period_of(chain.chain_id, chain.resolved_poll_interval_s),
            )
            self.clients[chain.name] = client
            alert = event_recorder(self.store, chain.name, clock, self._plan_of(chain.name))
            self.watchers[chain.name] = ChainWatcher(
                chain,
                self.store,
                client,
                clock=clock,
                gate=pool.gate_for(chain.rpc, chain.quorum, client, alert=alert),
                budget=budget,
            )
            self.health[chain.name] = ChainHealth()
            self._locks[chain.name] = threading.Lock()
        self.scheduler = BackgroundScheduler(timezone="UTC")
        self.started_at = clock()
        self.stopping = threading.Event()
        """Set on SIGTERM: a catching-up poll yields at once, so the lease goes quickly."""
        self.handoff = HandoffManager(
            self.store,
            [c.name for c in config.chains] + [src.name for src in config.sources],
            config.handoff.instance_id or default_instance_id(),
            config.handoff.lease_s,
            config.handoff.renew_s,
            clock,
            self.watchers,
            self._locks,
            balance=config.handoff.balance,
        )
        try:
            self.components = build_components(self)
        except BaseException:
            self.store.close()  # e.g. no usable signing key: nothing may stay open
            raise
        self.inbox = _inbox(self)
        """The webhook inbox of the sources (None without ``[[sources]]``)."""

    def _plan_of(self, name: str) -> Callable[[], OutboxPlan | None]:
        """The outbox plan of chain ``name``'s engine, once built (for gate alerts)."""

        def plan() -> OutboxPlan | None:
            watcher = self.watchers.get(name)
            return watcher.plan if watcher is not None else None

        return plan

    # -- chains --------------------------------------------------------------------------

    def chain_config(self, name: str) -> ChainConfig:
        """Config of a chain; raises ``UnknownChainName`` listing the configured ones."""
        return self.config.chain(name)

    def check_chain(self, chain: ChainConfig) -> None:
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

    def start_chain(self, name: str) -> None:
        """Check the node and load the chain's state; raises on a chain id mismatch."""
        chain = self.chain_config(name)
        self.check_chain(chain)
        watcher = self.watchers[name]
        watcher.start()
        self.health[name].started = True
        for a in self._wrong_chain.pop(name, []):
            watcher.endpoint_problem(
                redact(a.endpoint),
                f"serves chain id {a.chain_id}, not {chain.chain_id}: not used",
            )

    def poll_chain(self, name: str) -> None:
        """One scheduler run for a chain: poll, and keep catching up for a bounded time."""
        health = self.health[name]
        if not self.handoff.owns(name):
            return  # another instance holds the chain's lease; the lease job may take it
        with self._locks[name]:
            try:
                if not health.started:
                    self.start_chain(name)
                watcher = self.watchers[name]
                started = time.monotonic()
                stats = watcher.poll()
                # Each catch-up round is planned within the budget like any poll: one that
                # does not fit ends the catch-up until the budget has room again.
                while (
                    stats.behind > 0
                    and stats.skipped is None
                    and time.monotonic() - started < CATCH_UP_SLICE_S
                    and not self.stopping.is_set()
                ):
                    stats = watcher.poll()
                health.last_success_ms = self.clock()
                health.last_error = None
                health.consecutive_errors = 0
                watcher.note_poll(None)  # rpc_unhealthy / rpc_recovered, once per period
                for component in self.components:
                    component.after_poll(name)
            except StaleFencingToken as exc:
                # Another instance took the chain over while this one was paused: the store
                # refused the write (and recorded it); stop processing the chain.
                log.warning("%s", exc)
                self.handoff.lost(name, exc.token)
            except ChainIdMismatch as exc:
                health.last_error = str(exc)
                health.consecutive_errors += 1
                log.error("%s", exc)
                self.watchers[name].note_poll(str(exc))
            except (ChainError, StoreError) as exc:
                health.last_error = str(exc)
                health.consecutive_errors += 1
                if isinstance(exc, ChainError):
                    self.watchers[name].note_poll(str(exc))
                if health.consecutive_errors in (1, 10) or health.consecutive_errors % 100 == 0:
                    log.warning("chain %s: %s (error #%d)", name, exc, health.consecutive_errors)

    def healthy(self, name: str) -> bool:
        """A chain is healthy when its last poll succeeded recently; a standby (another
        instance holds the chain's lease) is healthy: it is ready to take over."""
        if not self.handoff.owns(name):
            return True
        health = self.health[name]
        if health.last_success_ms is None or health.last_error is not None:
            return False
        interval_ms = self.poll_interval_s(name) * 1000
        return self.clock() - health.last_success_ms <= 5 * interval_ms + 10_000

    def poll_interval_s(self, name: str) -> float:
        """The chain's poll interval, stretched when its budget cannot pay one call per poll."""
        interval = self.chain_config(name).resolved_poll_interval_s
        budget = self.budgets.get(name)
        return budget.interval_s(interval) if budget is not None else interval

    def budget_status(self, name: str) -> dict[str, object] | None:
        """The chain's budget and spend, and why polls wait if they do (GET /v1/chains)."""
        budget = self.budgets.get(name)
        if budget is None:
            return None
        status = budget.snapshot()
        status["poll_interval_s"] = self.poll_interval_s(name)
        status["waiting"] = self.watchers[name].deferred
        return status

    # -- running -------------------------------------------------------------------------

    def start_polling(self) -> None:
        """Take the leases that are free, then start the lease keeper (a thread of its own:
        renewals never wait for the scheduler's pool or a chain lock), the lease job (takes
        and gives leases away) and one polling job per chain, first run now (on SQLite this
        instance owns everything)."""
        self.handoff.tick()
        self.handoff.start_keeper()
        if self.handoff.enabled:
            self.scheduler.add_job(
                self.handoff.tick,
                "interval",
                seconds=self.handoff.tick_s,
                id="handoff:leases",
                max_instances=1,
                coalesce=True,
                misfire_grace_time=None,
            )
        for chain in self.config.chains:
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
                id=f"poll:{chain.name}",
                max_instances=1,
                coalesce=True,
                misfire_grace_time=None,
                next_run_time=_now_utc(),
            )
        self.scheduler.start()
        for component in self.components:
            component.start()

    def stop(self) -> None:
        """Stop polling (waiting for a running poll to finish its block; the keeper renews
        the leases meanwhile), stop the keeper and release the leases so a standby takes
        over at once, stop the components and close the store."""
        self.stopping.set()
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
        self.store.close()

    def run(self, create_app: Callable[[Service], ASGIApp]) -> None:
        """Run until SIGTERM/SIGINT: the API ``create_app`` builds over this service in the
        foreground, polling in the background. The HTTP side is passed in (watcher/cli
        gives ``watcher.api.create_app``): the wiring point never imports the API, which
        sits above it."""
        for chain in self.config.chains:
            try:
                self.start_chain(chain.name)
            except ChainIdMismatch:
                self.store.close()
                raise
            except ChainError as exc:
                self.health[chain.name].last_error = str(exc)
                log.warning(
                    "chain %s: node not reachable at start-up, will keep trying: %s",
                    chain.name,
                    exc,
                )
        app = create_app(self)
        server = _Server(
            self.stopping,
            uvicorn.Config(
                app,
                host=self.config.api.host,
                port=self.config.api.port,
                log_config=None,
                access_log=False,
                lifespan="off",
                # Open SSE streams would otherwise hold a SIGTERM for their full timeout;
                # clients resume with Last-Event-ID.
                timeout_graceful_shutdown=2,
            ),
        )
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
            server.run()
        finally:
            self.stop()


class _Server(uvicorn.Server):
    """uvicorn's server, also telling the pollers at once that a shutdown began."""

    def __init__(self, stopping: threading.Event, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._stopping = stopping

    def handle_exit(self, sig: int, frame: object) -> None:
        self._stopping.set()
        super().handle_exit(sig, frame)  # type: ignore[arg-type]


def _now_utc() -> object:
    from datetime import UTC, datetime

    return datetime.now(UTC)


def build_components(service: Service) -> list[Component]:
    """The components of a daemon, in start order."""
    from watcher import receipts
    from watcher.delivery import sender as delivery
    from watcher.engine import endpoint_alerts, heads

    issuers = receipts.components(service)
    senders = delivery.components(service)
    for issuer in issuers:
        for sender in senders:
            # A commit waiting for its receipt goes as soon as the receipt is stored.
            issuer.on_issued = sender.wake.set
    built: list[Component] = [*issuers, *senders]
    return [
        *built,
        *_sources(service, built),
        *heads.components(service),
        *endpoint_alerts.components(service),
    ]


def _sources(service: Service, built: list[Component]) -> list[Component]:
    """The sources component ([] without ``[[sources]]``): it shares the outbox plan (alert
    routes) the delivery component gave the chain engines, and wakes the receipts component
    (it signs what was just decided), then the sender, after storing a decision."""
    from watcher.delivery.plan import routes_from_config
    from watcher.delivery.sender import Sender
    from watcher.receipts import ReceiptIssuer
    from watcher.sources.poller import SourcePoller

    configs = service.config.sources
    if not configs:
        return []
    plans = [w.plan for w in service.watchers.values()]
    plan = plans[0] if plans else OutboxPlan(routes_from_config(service.config.alerts))
    notify = [c.after_poll for c in built if isinstance(c, ReceiptIssuer)]
    notify += [c.after_poll for c in built if isinstance(c, Sender)]
    poller = SourcePoller(
        service.store,
        configs,
        plan,
        service.clock,
        service.scheduler,
        notify,
        owns=service.handoff.owns,
        fence_of=service.handoff.fence,
    )
    return [poller]


def _inbox(service: Service) -> WebhookInbox | None:
    """The sources' webhook inbox, applied by the owner after each lease check (None
    without sources)."""
    poller = next((c for c in service.components if isinstance(c, SourcePoller)), None)
    if poller is None:
        return None
    inbox = WebhookInbox(service.store, poller, service.handoff, service.clock)
    service.handoff.after_tick.append(inbox.apply_owned)
    return inbox
