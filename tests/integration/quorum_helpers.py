"""A chain followed through several endpoints, each a fault-injecting proxy over a real anvil.

Used by the failover, quorum and chaos tests: the watcher gets the same client and gate the
service builds (chains.pool), and gate alerts are recorded through watcher.engine.disagreement.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from chains import pool
from chains.multi import MultiRpcClient
from tests.support.anvil import Anvil
from tests.support.daemon import toml_value
from tests.support.faulty_proxy import FaultyProxy
from tests.support.rigs import CHAIN, FakeClock, Rig, build_watcher, chain_config
from watcher.api.server import create_app
from watcher.app.build import build
from watcher.app.daemon import App
from watcher.config.loading import parse_config
from watcher.engine.chain_watcher import ChainWatcher
from watcher.engine.disagreement import event_recorder
from watcher.store import Store


@dataclass
class MultiRig(Rig):
    """A :class:`Rig` whose endpoints are proxies; ``client`` is the failover client."""

    proxies: list[FaultyProxy]
    multi: MultiRpcClient

    def transport_prefer_first(self) -> None:
        """Make the first endpoint the sticky one again (as after the others fail)."""
        self.multi.transport.active = 0

    def close(self) -> None:
        """Stop the proxies and the store."""
        for proxy in self.proxies:
            proxy.close()
        self.store.close()


def multi_rig(
    anvil: Anvil,
    store_url: str,
    upstreams: list[str] | None = None,
    quorum: int = 2,
    confirmations: int = 3,
    **overrides: Any,
) -> MultiRig:
    """Proxies over ``upstreams`` (default: two over ``anvil``), a store and a watcher."""
    proxies = [FaultyProxy(url) for url in (upstreams or [anvil.url, anvil.url])]
    config = chain_config(
        anvil,
        confirmations=confirmations,
        rpc=[p.url for p in proxies],
        quorum=quorum,
        rpc_timeout_s=2.0,
        rpc_backoff_s=0.2,
        **overrides,
    )
    clock = FakeClock()
    store = Store.open(store_url)
    client = pool.client_for(
        config.rpc, chain_id=31337, timeout_s=2.0, base_backoff_s=0.2, chain_check_s=0.0
    )
    assert isinstance(client, MultiRpcClient)
    holder: list[ChainWatcher] = []
    alert = event_recorder(store, CHAIN, clock, lambda: holder[0].plan if holder else None)
    gate = pool.gate_for(config.rpc, quorum, client, alert=alert, finalized_every_blocks=1)
    watcher = build_watcher(config, store, client, clock, gate=gate)
    holder.append(watcher)
    return MultiRig(anvil, config, store, client, watcher, clock, proxies, client)


def observed_by(rig: Rig, settlement_id: str) -> list[str]:
    """Endpoints the settlement's decision says agreed (from its stored evidence)."""
    text = json.dumps(rig.store.settlement(settlement_id).decision)
    decision = json.loads(text)
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("observed_by"), list):
                found.extend(node["observed_by"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(decision)
    return found


def service_over(
    tmp_path: Path,
    rpc: list[str],
    monotonic: Callable[[], float] | None = None,
    store_url: str | None = None,
    instance_id: str | None = None,
    **chain: Any,
) -> App:
    """A built daemon (not started) following chain ``local`` through ``rpc``, on a
    SQLite store in ``tmp_path`` (or ``store_url``), as ``instance_id`` when given;
    ``chain`` adds keys to its ``[[chains]]`` table."""
    handoff = (
        [] if instance_id is None else ["[handoff]", f"instance_id = {toml_value(instance_id)}"]
    )
    text = "\n".join(
        [
            "[store]",
            f"url = {toml_value(store_url or f'sqlite:///{tmp_path}/s.db')}",
            *handoff,
            "[signing]",
            f"dev_key_file = {toml_value(f'{tmp_path}/dev.key')}",
            "[[chains]]",
            'name = "local"',
            "chain_id = 31337",
            f"rpc = {toml_value(rpc)}",
            *(f"{key} = {toml_value(value)}" for key, value in chain.items()),
        ]
    )
    config = parse_config(text, "<test>")
    return build(config) if monotonic is None else build(config, monotonic=monotonic)


def api_get(service: App, path: str) -> httpx.Response:
    """One GET to the built daemon's API, in process (through ASGI, no socket)."""

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(service))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.get(path)

    return asyncio.run(send())


def close_built(service: App) -> None:
    """Free what a built, never started daemon holds: its store and its hold on the SQLite
    file (one daemon per store: a second build on the same file is refused until then)."""
    service.store.close()
    if service.instance_lock is not None:
        service.instance_lock.release()
