"""Building blocks for integration tests: a chain config for an anvil, a store, a watcher.

Everything here talks to real services (a real anvil, a real SQLite file or PostgreSQL
schema); only the clock is controllable, so timeouts can be tested without sleeping.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert

from chains.rpc import RpcClient, RpcTransport, Web3Transport
from tests.support.anvil import Anvil
from watcher.clock import wall_clock_ms
from watcher.config.chains import ChainConfig
from watcher.delivery.format import RECEIPT_KINDS
from watcher.engine.chain_watcher import ChainWatcher
from watcher.settlements import Registration, register, settlement_view
from watcher.store import NewSettlement, SettlementRecord, Store, schema

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
        self.watcher = ChainWatcher(self.config, self.store, self.client, clock=self.clock)
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


def make_watcher(
    anvil: Anvil,
    store_url: str,
    clock: FakeClock | None = None,
    transport: RpcTransport | None = None,
    confirmations: int = 3,
    finality: str = "depth",
    **overrides: Any,
) -> Rig:
    """Open a store at ``store_url`` and build a watcher for ``anvil`` over it."""
    clock = clock or FakeClock()
    config = chain_config(anvil, confirmations=confirmations, finality=finality, **overrides)
    store = Store.open(store_url)
    client = RpcClient(transport or Web3Transport(anvil.url))
    watcher = ChainWatcher(config, store, client, clock=clock)
    return Rig(anvil, config, store, client, watcher, clock)


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


def numbered_settlement(n: int, **fields: Any) -> NewSettlement:
    """A settlement row of chain ``local`` numbered ``n`` (id and tx hash from it), awaiting,
    registered at 1 s with a minute to wait; ``fields`` replace any of its values."""
    values: dict[str, Any] = {
        "settlement_id": f"stl_{n:024x}",
        "chain": "local",
        "tx_hash": f"0x{n:064x}",
        "required_confirmations": 3,
        "finality_mode": "depth",
        "timeout_ms": 60_000,
        "initiated_at": 1_000,
        "deadline": 61_000,
        "digest": "sha256:" + "0" * 64,
        "decision": {"verdict": "AWAITING_FINALITY"},
    }
    return NewSettlement(**(values | fields))


def random_tx_hash() -> str:
    """A well-formed hash no node knows."""
    return "0x" + secrets.token_hex(32)


def wait_included(anvil: Anvil, tx_hash: str) -> int:
    """The block number of ``tx_hash`` once mined (automine may lag the send)."""
    return int(anvil.receipt(tx_hash)["blockNumber"], 16)


class LaggingTransport:
    """A real transport that, when ``lag_to`` is set, answers ``latest`` with an older block.

    It asks the real node for block ``lag_to`` instead of ``latest``: a real answer from a
    real node, just as a load-balanced node that is behind would give.
    """

    def __init__(self, inner: Web3Transport) -> None:
        self.inner = inner
        self.endpoint = inner.endpoint
        self.lag_to: int | None = None

    def request(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        if (
            self.lag_to is not None
            and method == "eth_getBlockByNumber"
            and params
            and params[0] == "latest"
        ):
            params = [hex(self.lag_to), *params[1:]]
        return self.inner.request(method, params)

    def batch(self, calls: Sequence[tuple[str, Sequence[Any]]]) -> list[Mapping[str, Any]]:
        return self.inner.batch(calls)


def store_receipt(store: Store, sid: str, kind: str, body: dict[str, Any]) -> None:
    """A signed receipt row as the receipts component stores it (its body as given), for
    tests of the delivery sender without a chain: a commit or discard waits for one."""
    with store._writer.begin() as conn:
        conn.execute(
            insert(schema.receipts).values(
                settlement_id=sid,
                kind=kind,
                signer="0x" + "ab" * 20,
                digest="sha256:" + "cd" * 32,
                body=body,
                created_at=wall_clock_ms(),
            )
        )


def sign_decision(store: Store, sid: str, verdict: str, decision_digest: str) -> None:
    """The receipt of ``verdict``'s kind made for the decision ``decision_digest``."""
    store_receipt(store, sid, RECEIPT_KINDS[verdict], {"decision_digest": decision_digest})
