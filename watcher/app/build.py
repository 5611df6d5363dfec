"""The one wiring point: every part of the daemon, built in order from a :class:`Config`.

Each part gets the narrow collaborators it uses, at construction, never the daemon itself:

1. the store, then the outbox plan (the alert routes every decision writer shares);
2. per chain: its call budget, its client and its lock;
3. the signing key, then the handoff manager (it signs each takeover's elements with it),
   then per chain its engine (store, client, clock, plan, gate, and the manager's fencing
   token, asked at every write);
4. the delivery sender, the receipts issuer (fenced by the handoff manager's leases; it
   wakes the sender when a receipt is stored), the sources poller and its webhook inbox,
   the endpoint alerts; then the chain runner (the poll jobs, running the components'
   after-poll hooks) and the WebSocket heads (they run the runner's poll).

Nothing registers a background job here: :class:`~watcher.app.daemon.App` schedules them
when it starts. A part that fails to build (no usable signing key) closes the store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from chains import pool
from chains.budget import CallBudget
from chains.rpc import RpcClient
from watcher.app.chains import ChainRunner
from watcher.app.daemon import App
from watcher.app.pacing import PollPacing
from watcher.clock import Clock, wall_clock_ms
from watcher.components import Component
from watcher.config.chains import ChainConfig
from watcher.config.model import Config
from watcher.delivery.plan import OutboxPlan, routes_from_config
from watcher.delivery.sender import Sender
from watcher.engine.chain_watcher import ChainWatcher
from watcher.engine.disagreement import event_recorder
from watcher.engine.endpoint_alerts import EndpointAlerts
from watcher.engine.heads import HeadsWaker
from watcher.handoff.manager import HandoffManager, default_instance_id
from watcher.receipts.component import ReceiptIssuer, build_issuer
from watcher.receipts.consensus import beacon_clients
from watcher.receipts.signer import Signer, load_signer
from watcher.sources.inbox import WebhookInbox
from watcher.sources.poller import SourcePoller
from watcher.store import Store, StoreError
from watcher.store.instance_lock import lock_store
from watcher.workflows.lapses import WorkflowLapses
from watcher.workflows.service import WorkflowService


@dataclass(frozen=True)
class _Chains:
    """Per chain: its client, live look-up client, budget (if any), engine and lock."""

    clients: dict[str, RpcClient]
    live_clients: dict[str, RpcClient]
    budgets: dict[str, CallBudget]
    watchers: dict[str, ChainWatcher]
    locks: dict[str, threading.Lock]


def build(
    config: Config,
    clock: Clock = wall_clock_ms,
    monotonic: Callable[[], float] = time.monotonic,
) -> App:
    """The daemon for ``config``, built and not started (``monotonic`` is the clock of the
    chains' call budgets). Raises ``SigningKeyError`` without a usable signing key, and
    :class:`~watcher.store.instance_lock.StoreInUse` when another daemon holds the SQLite
    store. The configuration is checked (the signing key loaded) before the store is
    opened: a daemon that cannot run must not create or migrate a database first."""
    signer = load_signer(config.signing, [(c.name, c.chain_id) for c in config.chains])
    lock = lock_store(config.store.url)
    try:
        store = Store.open(config.store.url, _instance_id(config))
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    try:
        return replace(_build(config, store, signer, clock, monotonic), instance_lock=lock)
    except BaseException:
        store.close()  # nothing may stay open
        if lock is not None:
            lock.release()
        raise


def _build(
    config: Config,
    store: Store,
    signer: Signer,
    clock: Clock,
    monotonic: Callable[[], float],
) -> App:
    started_at = clock()
    plan = OutboxPlan(routes_from_config(config.alerts))
    chains = _build_chains(config, clock, monotonic)
    handoff = _handoff(config, store, clock, chains, signer, plan)
    _build_engines(config, store, clock, plan, chains, handoff.fence)
    scheduler = BackgroundScheduler(timezone="UTC")
    parts = _build_parts(config, store, clock, plan, chains, handoff, signer, scheduler)
    stopping = threading.Event()
    runner = ChainRunner(
        config.chains,
        chains.clients,
        chains.watchers,
        chains.budgets,
        chains.locks,
        handoff.owns,
        handoff.lost,
        clock,
        stopping,
        [c.after_poll for c in parts.polled],
    )
    pacing = PollPacing(config.chains, scheduler, clock)
    ws = [c for c in config.chains if c.heads == "ws"]
    heads = HeadsWaker(ws, pacing.woken(runner.poll), scheduler, stopping) if ws else None
    workflows = WorkflowService(store, signer, clock, lambda: plan)
    return App(
        config=config,
        store=store,
        clock=clock,
        clients=chains.clients,
        live_clients=chains.live_clients,
        budgets=chains.budgets,
        watchers=chains.watchers,
        chains=runner,
        pacing=pacing,
        handoff=handoff,
        scheduler=scheduler,
        stopping=stopping,
        receipts=parts.issuer,
        senders=[parts.sender],
        sources=parts.sources,
        inbox=parts.inbox,
        heads=heads,
        components=[*parts.in_start_order(heads), WorkflowLapses(workflows)],
        workflows=workflows,
        plan=plan,
        started_at=started_at,
    )


def _instance_id(config: Config) -> str:
    """This instance's name in leases, handoff records and its database sessions."""
    return config.handoff.instance_id or default_instance_id()


def _handoff(
    config: Config, store: Store, clock: Clock, chains: _Chains, signer: Signer, plan: OutboxPlan
) -> HandoffManager:
    """The leases of every chain and source, handed between instances."""

    def alert(name: str, kind: str, payload: dict[str, Any]) -> bool:
        """A handoff alert, stored as an event of the lease's chain or source with its
        alert deliveries (unfenced: said by an instance that does not hold the lease)."""
        try:
            event_recorder(store, name, clock, lambda: plan)(kind, "critical", payload)
        except StoreError:
            return False  # said again at the next check
        return True

    return HandoffManager(
        store,
        [c.name for c in config.chains] + [src.name for src in config.sources],
        _instance_id(config),
        config.handoff.lease_s,
        config.handoff.renew_s,
        clock,
        chains.watchers,  # filled next, by _build_engines: each engine asks handoff.fence
        chains.locks,
        balance=config.handoff.balance,
        signer=signer,
        nodes=chains.clients,
        alert=alert,
    )


@dataclass(frozen=True)
class _Parts:
    """The components that work after each poll, and the sources' webhook inbox."""

    issuer: ReceiptIssuer
    sender: Sender
    sources: SourcePoller | None
    inbox: WebhookInbox | None
    endpoints: EndpointAlerts | None

    @property
    def polled(self) -> list[Component]:
        """The components with work after a chain's poll, in the order they run it (a heads
        waker has none: its wake-ups come from the node)."""
        optional = [c for c in (self.sources, self.endpoints) if c is not None]
        return [self.issuer, self.sender, *optional]

    def in_start_order(self, heads: HeadsWaker | None) -> list[Component]:
        """Every component, in start order (stopped in reverse)."""
        optional = [c for c in (self.sources, heads, self.endpoints) if c is not None]
        return [self.issuer, self.sender, *optional]


def _build_parts(
    config: Config,
    store: Store,
    clock: Clock,
    plan: OutboxPlan,
    chains: _Chains,
    handoff: HandoffManager,
    signer: Signer,
    scheduler: BackgroundScheduler,
) -> _Parts:
    """Delivery, receipts (fenced by the leases; a stored receipt wakes the sender at once),
    the sources poller and its inbox, the endpoint alerts."""
    log_channels = [c for c in config.alerts if c.type == "log"]
    sender = Sender(store, config.delivery, clock, log_channels, destinations=config.destinations())
    issuer = build_issuer(
        config,
        store,
        chains.clients,
        signer,
        clock,
        fence_of=handoff.fence,
        on_lost=handoff.lost,
        on_issued=sender.wake.set,
    )
    sources = inbox = None
    if config.sources:
        # The receipts issuer first (it signs what was just decided), then the sender.
        notify = [issuer.after_poll, sender.after_poll]
        sources = SourcePoller(
            store,
            config.sources,
            plan,
            clock,
            scheduler,
            notify,
            owns=handoff.owns,
            fence_of=handoff.fence,
        )
        inbox = WebhookInbox(store, sources, handoff, clock)
    several = any(len(c.rpc) > 1 or c.beacon_api for c in config.chains)
    beacons = beacon_clients(issuer.builders)
    endpoints = EndpointAlerts(chains.clients, chains.watchers, beacons) if several else None
    return _Parts(issuer, sender, sources, inbox, endpoints)


def _build_chains(config: Config, clock: Clock, monotonic: Callable[[], float]) -> _Chains:
    """Each configured chain's budget, client (failover over its endpoints) and lock; the
    engines come after the handoff manager (:func:`_build_engines`)."""
    built = _Chains({}, {}, {}, {}, {})
    for chain in config.chains:
        budget = None
        if chain.calls_per_minute is not None:
            budget = CallBudget(chain.calls_per_minute, clock=monotonic)
            built.budgets[chain.name] = budget
        client = _client(chain, budget)
        built.clients[chain.name] = client
        # Live look-ups never spend the engine's budget (watcher/api/live_limits.py).
        built.live_clients[chain.name] = client if budget is None else _client(chain, None)
        built.locks[chain.name] = threading.Lock()
    return built


def _build_engines(
    config: Config,
    store: Store,
    clock: Clock,
    plan: OutboxPlan,
    chains: _Chains,
    fence_of: Callable[[str], tuple[str, int] | None],
) -> None:
    """Each chain's engine, writing under the handoff's fencing token (``fence_of``, as
    the receipts and sources do), into ``chains.watchers``."""
    for chain in config.chains:
        client = chains.clients[chain.name]
        alert = event_recorder(store, chain.name, clock, lambda: plan)
        chains.watchers[chain.name] = ChainWatcher(
            chain,
            store,
            client,
            clock=clock,
            gate=pool.gate_for(chain.rpc, chain.quorum, client, alert=alert),
            budget=chains.budgets.get(chain.name),
            plan=plan,
            fence_of=fence_of,
        )


def _client(chain: ChainConfig, budget: CallBudget | None) -> RpcClient:
    """The chain's client over its endpoints (weights, timeouts, limits, stall period)."""
    return pool.client_for(
        chain.rpc,
        chain_id=chain.chain_id,
        weights=chain.rpc_weights,
        timeout_s=chain.rpc_timeout_s,
        base_backoff_s=chain.rpc_backoff_s,
        budget=budget,
        rate_limits=chain.rpc_rate_limits,
        stall_s=pool.stall_period_of(chain.chain_id, chain.resolved_poll_interval_s),
    )
