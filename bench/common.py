"""Shared set-up for the benchmarks: an anvil, a proxy, a store and a chain watcher."""

from __future__ import annotations

import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from chains.rpc import connect
from tests.support.anvil import Anvil
from watcher.clock import Clock, wall_clock_ms
from watcher.config.chains import ChainConfig
from watcher.config.loading import parse_config
from watcher.engine.chain_watcher import ChainWatcher
from watcher.settlements import Registration, new_settlement
from watcher.store import Store

if TYPE_CHECKING:
    from watcher.app.daemon import App


def median_ms(action: Callable[[], object], runs: int) -> float:
    """Median wall-clock milliseconds of ``runs`` calls of ``action``."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def chain_config(rpc: str, **overrides: object) -> ChainConfig:
    """The local chain's config pointed at ``rpc``."""
    lines = [
        f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v)}".replace("'", '"')
        for k, v in overrides.items()
    ]
    text = "\n".join(
        [
            "[[chains]]",
            'name = "local"',
            "chain_id = 31337",
            f'rpc = ["{rpc}"]',
            "confirmations = 3",
            *lines,
        ]
    )
    return parse_config(text, "<bench>").chains[0]


def fresh_store() -> Store:
    """A new SQLite store in a temporary directory."""
    path = os.path.join(tempfile.mkdtemp(prefix="fw-bench-"), "bench.db")
    return Store.open(f"sqlite:///{path}")


def register_synthetic(store: Store, chain: ChainConfig, count: int) -> list[str]:
    """Register ``count`` random (never broadcast) tx hashes in bulk; returns the hashes."""
    now = time.time_ns() // 1_000_000
    hashes = ["0x" + secrets.token_hex(32) for _ in range(count)]
    for start in range(0, count, 5000):
        store.register_many(
            [new_settlement(Registration(chain, h), now) for h in hashes[start : start + 5000]]
        )
    return hashes


def watcher_for(
    store: Store,
    chain: ChainConfig,
    clock: Clock = wall_clock_ms,
    fence: tuple[str, int] | None = None,
) -> ChainWatcher:
    """A chain watcher reading through ``chain.rpc[0]``, writing under ``fence``."""
    client = connect(chain.rpc[0])
    return ChainWatcher(chain, store, client, clock=clock, fence_of=lambda _name: fence)


__all__ = ["Anvil", "chain_config", "fresh_store", "register_synthetic", "watcher_for"]


def started_service(chain: ChainConfig) -> App:
    """A daemon's service (no API) following ``chain`` on a fresh SQLite store, its chain
    started and its pollers running: what the latency benchmarks measure. Stop it after."""
    from watcher.app.build import build
    from watcher.config.model import Config

    store = fresh_store()
    config = Config(store={"url": store.url}, chains=[chain])  # type: ignore[arg-type]
    store.close()
    service = build(config)
    service.start_chain(chain.name)
    service.start_polling()
    return service


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]
