"""Shared set-up for the benchmarks: an anvil, a proxy, a store and a chain watcher."""

from __future__ import annotations

import os
import secrets
import tempfile
import time

from chains.rpc import connect
from tests.support.anvil import Anvil
from watcher.config import ChainConfig, parse_config
from watcher.engine import ChainWatcher, Clock, wall_clock_ms
from watcher.settlements import Registration, new_settlement
from watcher.store import Store


def chain_config(rpc: str, **overrides: object) -> ChainConfig:
    """The local chain's config pointed at ``rpc``."""
    lines = [f"{k} = {v!r}".replace("'", '"') for k, v in overrides.items()]
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


def watcher_for(store: Store, chain: ChainConfig, clock: Clock = wall_clock_ms) -> ChainWatcher:
    """A chain watcher reading through ``chain.rpc[0]``."""
    return ChainWatcher(chain, store, connect(chain.rpc[0]), clock=clock)


__all__ = ["Anvil", "chain_config", "fresh_store", "register_synthetic", "watcher_for"]
