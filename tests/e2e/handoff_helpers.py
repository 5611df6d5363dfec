"""Two or more daemons sharing one PostgreSQL schema, for the handoff tests and the bench."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.support.daemon import Daemon, toml_value, wait_for
from tests.support.receiver import Receiver

SECRET = "handoff-secret"
DELIVERY: dict[str, Any] = {
    "backoff_initial_s": 0.2,
    "backoff_max_s": 0.5,
    "timeout_s": 1.0,
    "receipt_wait_s": 0.5,
    "max_attempts": 100,
}


def handoff_config(instance: str, lease_s: float, renew_s: float) -> str:
    """The ``[handoff]`` table of one instance."""
    return (
        "\n[handoff]\n"
        f"instance_id = {toml_value(instance)}\n"
        f"lease_s = {toml_value(lease_s)}\n"
        f"renew_s = {toml_value(renew_s)}\n"
    )


def pg_daemon(
    tmp_path: Path,
    anvil_url: str,
    store_url: str,
    instance: str,
    receiver: Receiver | None = None,
    lease_s: float = 2.0,
    renew_s: float = 0.5,
    **chain: Any,
) -> Daemon:
    """A daemon (not started) on the shared store, named ``instance``."""
    extra = handoff_config(instance, lease_s, renew_s)
    if receiver is not None:
        extra += receiver.daemon_config(SECRET, alerts=(), **DELIVERY)
    chain.setdefault("poll_interval_s", 0.1)
    return Daemon(
        tmp_path / instance,
        anvil_url,
        start=False,
        store_url=store_url,
        extra_config=extra,
        **chain,
    )


def owner(daemon: Daemon, name: str = "local") -> tuple[str | None, int] | None:
    """(owner, token) of a lease, read from the store."""
    rows = daemon.query("SELECT owner, token FROM leases WHERE name = ?", name)
    return (rows[0][0], int(rows[0][1])) if rows else None


def wait_owner(daemon: Daemon, instance: str, timeout: float = 15.0) -> float:
    """Wait until ``instance`` holds the lease of ``local``; returns when (monotonic)."""
    wait_for(
        lambda: (owner(daemon) or (None, 0))[0] == instance,
        timeout,
        interval=0.01,
        what=f"{instance} owning local",
    )
    return time.monotonic()


def commit_counts(receiver: Receiver) -> Counter[str]:
    """Applied commit effects per settlement id (the receiver dedupes by Idempotency-Key,
    so a count above one means the same commit went out under two keys)."""
    return Counter(str(e.get("settlement_id")) for e in receiver.effects(type_="commit"))


def stale_writes_accepted(daemon: Daemon) -> int:
    """Refused writes that nonetheless left a trace: a handoff whose predecessor token is
    not below the successor's (the store would have had to accept a stale token)."""
    rows = daemon.query(
        "SELECT count(*) FROM handoffs WHERE from_token IS NOT NULL AND from_token >= to_token"
    )
    return int(rows[0][0])
