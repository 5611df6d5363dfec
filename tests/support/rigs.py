"""The rigs tests build a layer on: one factory per layer, so a change in how a layer is
constructed is made in one function, not in every test file.

- engine: :func:`build_watcher` is the one place a test constructs a ``ChainWatcher``;
  :func:`make_watcher` puts it over a real node, a real store and a controllable clock
  (:class:`Rig`), and :class:`RigFactory` builds several and closes them all.
- sources: :class:`SourceRig` is one off-chain source (an RQ or Celery queue on the
  machine's Redis, say) read by a real ``SourcePoller`` over a real store.

Everything talks to real services; only the clock is controllable, so deadlines can be
tested without sleeping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from chains.budget import CallBudget
from chains.quorum import FinalityGate
from chains.rpc import RpcClient, RpcTransport, Web3Transport
from tests.support.anvil import Anvil
from tests.support.daemon import wait_for
from watcher.config.chains import ChainConfig
from watcher.config.sources import SourceConfig
from watcher.delivery.plan import OutboxPlan
from watcher.engine.chain_watcher import ChainWatcher
from watcher.settlements import Registration, register, settlement_view
from watcher.sources.poller import SourcePoller
from watcher.sources.settlements import new_source_settlement
from watcher.store import SettlementRecord, Store

CHAIN = "local"
START_MS = 1_700_000_000_000


class FakeClock:
    """A Unix-millisecond clock that moves only when told to."""

    def __init__(self, start_ms: int = START_MS) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float = 0.0, ms: int = 0) -> int:
        """Move forward; returns the new time."""
        self.now += int(seconds * 1000) + ms
        return self.now


# -- engine ---------------------------------------------------------------------------------


def chain_config(
    anvil: Anvil, confirmations: int = 3, finality: str = "depth", **overrides: Any
) -> ChainConfig:
    """A validated config for the local chain served by ``anvil``."""
    values: dict[str, Any] = {
        "name": CHAIN,
        "chain_id": 31337,
        "rpc": [anvil.url],
        "confirmations": confirmations,
        "finality": finality,
        "poll_interval_s": 0.1,
    }
    values.update(overrides)
    return ChainConfig.model_validate(values)


def build_watcher(
    config: ChainConfig,
    store: Store,
    client: RpcClient,
    clock: Callable[[], int],
    gate: FinalityGate | None = None,
    budget: CallBudget | None = None,
) -> ChainWatcher:
    """The one place a test constructs a ``ChainWatcher`` (what the daemon's wiring builds
    for one chain): a change to its construction is made here."""
    return ChainWatcher(config, store, client, clock=clock, gate=gate, budget=budget)


@dataclass
class Rig:
    """One chain under test: node, config, store, client, watcher and the shared clock."""

    anvil: Anvil
    config: ChainConfig
    store: Store
    client: RpcClient
    watcher: ChainWatcher
    clock: FakeClock

    def restart(self, client: RpcClient | None = None) -> ChainWatcher:
        """A new watcher on the same store (what a restarted daemon builds)."""
        self.client = client or RpcClient(Web3Transport(self.anvil.url))
        self.watcher = build_watcher(self.config, self.store, self.client, self.clock)
        return self.watcher

    def register(self, tx_hash: str, **kw: Any) -> SettlementRecord:
        """Register ``tx_hash`` at the rig's clock."""
        return register_tx(self.store, self.config, tx_hash, now=self.clock(), **kw)

    def settlement(self, settlement_id: str) -> SettlementRecord:
        """The stored settlement."""
        return self.store.settlement(settlement_id)

    def view(self, settlement_id: str) -> dict[str, Any]:
        """The public view, at the watcher's head."""
        head = self.watcher.head
        rec, number = self.store.settlement(settlement_id), head.number if head else None
        return settlement_view(rec, number, now=self.clock())

    def events(self, settlement_id: str | None = None, kind: str | None = None) -> list[Any]:
        """Stored events, optionally filtered."""
        return [e for e in self.store.events(settlement_id) if kind is None or e.kind == kind]

    def mine_and_poll(self, blocks: int = 1) -> None:
        """Mine ``blocks`` and let the watcher process them."""
        self.anvil.mine(blocks)
        self.watcher.catch_up()

    def close(self) -> None:
        """Close the store (the watcher holds nothing else)."""
        self.store.close()


def make_watcher(
    anvil: Anvil,
    store_url: str,
    clock: FakeClock | None = None,
    transport: RpcTransport | None = None,
    confirmations: int = 3,
    finality: str = "depth",
    **overrides: Any,
) -> Rig:
    """Open a store at ``store_url`` and build a watcher for ``anvil`` over it; ``overrides``
    are more keys of the chain's config."""
    clock = clock or FakeClock()
    config = chain_config(anvil, confirmations=confirmations, finality=finality, **overrides)
    store = Store.open(store_url)
    client = RpcClient(transport or Web3Transport(anvil.url))
    watcher = build_watcher(config, store, client, clock)
    return Rig(anvil, config, store, client, watcher, clock)


class RigFactory:
    """Engine rigs over fresh SQLite files in one directory, all closed by :meth:`close`
    (the ``make_rig`` fixture)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.rigs: list[Rig] = []

    def __call__(
        self,
        anvil: Anvil,
        *,
        store_url: str | None = None,
        clock: FakeClock | None = None,
        transport: RpcTransport | None = None,
        confirmations: int = 3,
        finality: str = "depth",
        start: bool = False,
        poll: bool = False,
        **overrides: Any,
    ) -> Rig:
        """A rig (its own SQLite file unless ``store_url``); ``start`` loads the watcher's
        state from the store, ``poll`` has it take the node's head before returning."""
        url = store_url or f"sqlite:///{self.directory}/finality-{len(self.rigs)}.db"
        rig = make_watcher(anvil, url, clock, transport, confirmations, finality, **overrides)
        self.rigs.append(rig)
        if start:
            rig.watcher.start()
        if poll:
            rig.watcher.poll()
        return rig

    def close(self) -> None:
        """Close every rig made."""
        for rig in self.rigs:
            rig.close()


def register_tx(
    store: Store,
    chain: ChainConfig,
    tx_hash: str,
    now: int,
    confirmations: int | None = None,
    timeout_s: float | None = None,
    dependent_state: dict[str, Any] | None = None,
) -> SettlementRecord:
    """Register a settlement for ``tx_hash`` at instant ``now`` (the watcher's clock)."""
    rec, _created = register(
        store,
        Registration(
            chain,
            tx_hash.lower(),
            confirmations=confirmations,
            timeout_s=timeout_s,
            dependent_state=dependent_state,
        ),
        now,
    )
    return rec


# -- sources --------------------------------------------------------------------------------


class Worker(Protocol):
    """The process that runs a source's jobs (``tests.support.jobs``' RQ and Celery workers)."""

    def log(self) -> str:
        """What it wrote so far."""
        ...

    def kill9(self) -> None:
        """SIGKILL it and what it forked, mid-job (a crashed machine)."""
        ...

    def stop(self) -> None:
        """Kill it."""
        ...


class SourceRig:
    """One off-chain source (``config``) whose jobs a real ``worker`` runs, read by a real
    poller over a SQLite store in ``tmp``: register a reference, poll until its verdict. The
    worker's log goes into failure messages."""

    def __init__(self, config: Mapping[str, Any], tmp: Path, worker: Worker) -> None:
        self.config = SourceConfig.model_validate(dict(config))
        self.name = self.config.name
        self.worker = worker
        self.store = Store.open(f"sqlite:///{tmp}/finality.db")
        self.poller = SourcePoller(self.store, [self.config], OutboxPlan())

    def register(self, ref: str, timeout_s: float | None = None) -> str:
        """Register ``ref`` at the poller's clock; the settlement id."""
        new = new_source_settlement(self.config, ref, self.poller.clock(), timeout_s)
        rec, _ = self.store.register(new)
        return rec.settlement_id

    def verdict(self, settlement_id: str) -> str:
        """The stored verdict."""
        return str(self.store.settlement(settlement_id).verdict)

    def settle(self, sid: str, verdict: str, timeout: float = 20.0) -> SettlementRecord:
        """Poll until ``sid`` has ``verdict`` (the worker's log in the failure otherwise)."""

        def decided() -> SettlementRecord | None:
            self.poller.poll(self.name)
            rec = self.store.settlement(sid)
            return rec if rec.verdict == verdict else None

        try:
            return wait_for(decided, timeout, interval=0.1, what=f"{sid} → {verdict}")
        except TimeoutError as exc:
            rec = self.store.settlement(sid)
            raise AssertionError(
                f"{exc}: {rec.verdict} {rec.decision['evidence']}\n{self.worker.log()}"
            ) from None

    def times_out_at_its_deadline(self, ref: str) -> SettlementRecord:
        """Register ``ref`` (nothing ever runs it) with half a second to wait, on a clock the
        rig moves: awaiting up to the last millisecond, timed out at the deadline itself.
        (On the wall clock a busy machine would pass the 0.5 s before the first poll.)"""
        start = int(self.poller.clock())
        clock = FakeClock(start)
        self.poller.clock = clock
        sid = self.register(ref, timeout_s=0.5)
        self.poller.poll(self.name)
        assert self.verdict(sid) == "AWAITING_FINALITY"
        clock.advance(0.499)
        self.poller.poll(self.name)
        assert self.verdict(sid) == "AWAITING_FINALITY"
        clock.advance(ms=1)  # the deadline itself: timed out
        return self.settle(sid, "TIMEOUT_TREATED_AS_FAILURE", timeout=5)

    def close(self) -> None:
        """Stop the worker and the poller, close the store."""
        self.worker.stop()
        self.poller.stop()
        self.store.close()
