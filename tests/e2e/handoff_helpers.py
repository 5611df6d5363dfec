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
    # The receiver is on loopback and some of these chains (31338) are not dev chains:
    # their commit_url must be allow-listed (the daemon posts to no
    # private address it was not told to trust).
    "allow_destinations": ["127.0.0.1"],
}


def handoff_config(instance: str, lease_s: float, renew_s: float, balance: bool = True) -> str:
    """The ``[handoff]`` table of one instance."""
    return (
        "\n[handoff]\n"
        f"instance_id = {toml_value(instance)}\n"
        f"lease_s = {toml_value(lease_s)}\n"
        f"renew_s = {toml_value(renew_s)}\n"
        f"balance = {toml_value(balance)}\n"
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


def lease_owners(daemon: Daemon) -> dict[str, str | None]:
    """Chain or source name -> owner of its lease (liveness rows ``@instance/...`` left out;
    a released or lapsed lease still names its last owner)."""
    rows = daemon.query("SELECT name, owner FROM leases WHERE name NOT LIKE ? ORDER BY name", "@%")
    return {str(n): o for n, o in rows}


def live_spread(daemon: Daemon) -> dict[str, int]:
    """Instance -> how many live leases it holds (from the store)."""
    now = int(time.time() * 1000)
    rows = daemon.query(
        "SELECT owner, count(*) FROM leases WHERE name NOT LIKE ? AND expires_at > ? "
        "GROUP BY owner",
        "@%",
        now,
    )
    return {str(o): int(n) for o, n in rows}


def custody_breaks(daemon: Daemon) -> list[str]:
    """Where the handoff records of a name do not form one chain of custody: each takeover
    must start from the previous one's owner and token, and tokens must grow (otherwise two
    instances held the name at once, or a takeover went unrecorded)."""
    rows = daemon.query(
        "SELECT name, from_owner, from_token, to_owner, to_token FROM handoffs ORDER BY id"
    )
    last: dict[str, tuple[str, int]] = {}
    breaks = []
    for name, from_owner, from_token, to_owner, to_token in rows:
        prev = last.get(name)
        expected = (None, None) if prev is None else prev
        if (from_owner, from_token) != expected or (prev and to_token <= prev[1]):
            breaks.append(
                f"{name}: {from_owner}/{from_token} -> {to_owner}/{to_token} after {prev}"
            )
        last[name] = (str(to_owner), int(to_token))
    return breaks


def wait_owner(daemon: Daemon, instance: str, timeout: float = 15.0) -> float:
    """Wait until ``instance`` holds the lease of ``local``; returns when (monotonic). A
    takeover that never comes fails with what could hold it up: the database's sessions
    (a lock held by a frozen owner) and the waiting daemon's log."""
    try:
        wait_for(
            lambda: (owner(daemon) or (None, 0))[0] == instance,
            timeout,
            what=f"{instance} owning local",
        )
    except TimeoutError as exc:
        raise TimeoutError(
            f"{exc}\n{sessions(daemon)}\n{daemon.log_tail(60)}\n{daemon.stacks()}"
        ) from None
    return time.monotonic()


def sessions(daemon: Daemon) -> str:
    """The database's sessions of finality daemons, one line each (PostgreSQL only)."""
    if not daemon.store_url.startswith("postgres"):
        return ""
    rows = daemon.query(
        "SELECT pid, application_name, state, wait_event, now() - xact_start, "
        "left(query, 80) FROM pg_stat_activity WHERE application_name LIKE ?",
        "finality %",
    )
    return "sessions:\n" + "\n".join("  " + " | ".join(map(str, r)) for r in rows)


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


def chains_config(chains: list[tuple[str, int, str]], **settings: Any) -> str:
    """More ``[[chains]]`` tables (name, chain id, RPC URL) to append to a daemon's config
    (TOML appends each ``[[chains]]`` to the list, wherever it stands)."""
    text = ""
    for name, chain_id, url in chains:
        text += f"\n[[chains]]\nname = {toml_value(name)}\nchain_id = {chain_id}\n"
        text += f"rpc = [{toml_value(url)}]\n"
        text += "".join(f"{k} = {toml_value(v)}\n" for k, v in settings.items())
    return text


def pg_multi_daemon(
    tmp_path: Path,
    chains: list[tuple[str, int, str]],
    store_url: str,
    instance: str,
    lease_s: float = 2.0,
    renew_s: float = 0.5,
    receiver: Receiver | None = None,
    extra_config: str = "",
    **chain: Any,
) -> Daemon:
    """A daemon (not started) on the shared store following every chain of ``chains``
    (the first is ``local``, the name :class:`Daemon` gives its own chain). A chain id
    other than 31337 or 1337 needs ``FINALITY_SIGNING_KEY`` in the environment."""
    first, *others = chains
    assert first[0] == "local", "the first chain is the Daemon's own, named local"
    chain.setdefault("poll_interval_s", 0.1)
    extra = handoff_config(instance, lease_s, renew_s) + extra_config
    if receiver is not None:
        extra += receiver.daemon_config(SECRET, alerts=(), **DELIVERY)
    extra += chains_config(
        others,
        confirmations=chain.get("confirmations", 3),
        poll_interval_s=chain["poll_interval_s"],
    )
    return Daemon(
        tmp_path / instance,
        first[2],
        start=False,
        store_url=store_url,
        extra_config=extra,
        chain_id=first[1],
        **chain,
    )
