"""Handoff benchmark, run by hand: ``.venv/bin/python -m bench.handoff``.

- failover after ``kill -9`` of the owner: time from the kill until the standby holds the
  lease (median and p95 over ``--runs``), with ``--lease`` seconds of lease;
- failover after SIGTERM: time from the signal until the standby holds the lease;
- one instance's throughput on PostgreSQL (fenced writes) against SQLite: settlements
  confirmed per second and blocks processed per second catching up ``--txs`` blocks;
- ``--only scaling``: settlements confirmed per second with 1, 2 and 3 daemons sharing
  three anvil chains (distinct chain ids) and one PostgreSQL schema, the ratio to one
  daemon, and which daemon owns which chain's lease (the clock starts once the leases have
  spread evenly: 3, 2+1, 1+1+1), and how many leases were taken over as lapsed during the
  run (every daemon stays up, so each one is a busy owner that failed to renew: should be 0).
  ``--keep-logs DIR`` keeps the daemons' logs (late-renewal warnings show there).

Needs the machine's PostgreSQL (``FINALITY_TEST_PG``, default the tests' URL) and anvil.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import tempfile
import time
from contextlib import AbstractContextManager
from pathlib import Path

from bench.common import Anvil, chain_config, fresh_store, p95, watcher_for
from guard.settlement import Verdict
from tests.conftest import fresh_pg_schema
from tests.e2e.handoff_helpers import (
    lease_owners,
    live_spread,
    owner,
    pg_daemon,
    pg_multi_daemon,
)
from tests.support.daemon import Daemon, wait_for
from watcher.settlements import Registration, register
from watcher.store import Store
from watcher.store import lease_store as ls


def pg_schema() -> AbstractContextManager[str]:
    """A PostgreSQL URL on a fresh schema, dropped afterwards."""
    return fresh_pg_schema("fw_bench_")


def _taken_over(daemon: Daemon, token: int) -> bool:
    return (owner(daemon) or (None, 0))[1] > token


def failover(anvil: Anvil, runs: int, lease_s: float) -> tuple[list[float], list[float]]:
    """kill -9 and SIGTERM failover times (seconds)."""
    kills: list[float] = []
    terms: list[float] = []
    with pg_schema() as url, tempfile.TemporaryDirectory() as tmp:
        renew = min(3.0, lease_s / 3)
        daemons = {
            n: pg_daemon(Path(tmp), anvil.url, url, n, lease_s=lease_s, renew_s=renew)
            for n in ("A", "B")
        }
        try:
            for d in daemons.values():
                d.start()
            for i in range(runs * 2):
                lease = wait_for(lambda: owner(daemons["A"]), 30, what="an owner")
                victim = daemons[str(lease[0])]
                time.sleep(0.5 + (i % 5) * 0.1)  # a little past the renewal phase each time
                assert victim.proc is not None
                signal_kill = i < runs
                if signal_kill:
                    victim.kill9()
                else:
                    victim.proc.send_signal(15)
                sent = time.monotonic()
                wait_for(
                    functools.partial(_taken_over, daemons["A"], lease[1]),
                    lease_s + 10,
                    interval=0.005,
                    what="takeover",
                )
                (kills if signal_kill else terms).append(time.monotonic() - sent)
                victim.proc.wait(10)
                victim.start()
        finally:
            for d in daemons.values():
                d.close()
    return kills, terms


def throughput(anvil: Anvil, store: Store, txs: int, fenced: bool) -> tuple[float, float]:
    """(settlements/s, blocks/s) of one watcher confirming ``txs`` settlements."""
    chain = chain_config(anvil.url, poll_interval_s=0.1, max_blocks_per_poll=1000)
    now = time.time_ns() // 1_000_000
    store.ensure_chain("local", 31337, now)
    fence = None
    if fenced:
        lease, _ = ls.acquire(store.writer, "local", "bench", now, 600_000, None)
        assert lease is not None
        fence = ("bench", lease.token)
    watcher = watcher_for(store, chain, fence=fence)
    watcher.poll()  # the head before the txs: the timed part processes every block after it
    start_block = anvil.head()
    for _ in range(txs):
        register(store, Registration(chain, anvil.send()), time.time_ns() // 1_000_000)
    anvil.mine(3)
    blocks = anvil.head() - start_block
    began = time.perf_counter()
    while store.verdict_counts().get(("local", Verdict.FINALITY_CONFIRMED), 0) < txs:
        watcher.catch_up()
        if time.perf_counter() - began > 120:
            break
    elapsed = time.perf_counter() - began
    counts = store.verdict_counts()
    assert counts.get(("local", Verdict.FINALITY_CONFIRMED), 0) == txs, counts
    return txs / elapsed, blocks / elapsed


SCALING_CHAINS = (("local", 31337), ("second", 1337), ("third", 31338))
"""The three chains of the scaling run (names, distinct chain ids)."""
BENCH_KEY = "0x" + "5e" * 32
"""Signing key of the scaling daemons (chain id 31338 is not a dev chain: no dev key)."""


def scaling(
    instances: int, per_chain: int, keep_logs: Path | None = None
) -> tuple[float, dict[str, str], int]:
    """(settlements/s, lease owner per chain, takeovers of a lapsed lease during the run)
    for ``instances`` daemons sharing 3 chains (every daemon stays up: a lapse means a busy
    owner did not renew in time).

    The txs wait in each node's mempool (``--no-mining``) while they are registered
    (round robin over the daemons); the clock starts when every chain mines 3 blocks at
    once and stops when the store shows every settlement FINALITY_CONFIRMED."""
    os.environ.setdefault("FINALITY_SIGNING_KEY", BENCH_KEY)
    with contextlib.ExitStack() as stack:
        anvils = [
            stack.enter_context(Anvil("--no-mining", "--chain-id", str(cid)))
            for _, cid in SCALING_CHAINS
        ]
        chains = [(n, cid, a.url) for (n, cid), a in zip(SCALING_CHAINS, anvils, strict=True)]
        url = stack.enter_context(pg_schema())
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        daemons = [
            pg_multi_daemon(tmp, chains, url, f"I{i + 1}", lease_s=5.0, renew_s=0.5)
            for i in range(instances)
        ]
        for d in daemons:
            stack.callback(d.close)
            if keep_logs is not None:
                stack.callback(_keep_log, d, keep_logs / f"scaling{instances}-{d.dir.name}.log")
        # The first one migrates the fresh schema (two daemons migrating one schema at once
        # can collide on alembic's table); the others start together once it answers, and
        # the leases spread out (balance) whoever asked first.
        daemons[0].spawn()
        _ready(daemons[0])
        for d in daemons[1:]:
            d.spawn()
        for d in daemons:
            _ready(d)
        even = sorted(
            len(chains) // instances + (1 if i < len(chains) % instances else 0)
            for i in range(instances)
        )
        wait_for(
            lambda: sorted(live_spread(daemons[0]).values()) == even,
            30,
            what=f"the chains spread {even} over the instances",
        )
        total = 0
        for (name, _), anvil in zip(SCALING_CHAINS, anvils, strict=True):
            for _ in range(per_chain):
                daemons[total % instances].register(anvil.send(), chain=name)
                total += 1
        began = time.perf_counter()
        for anvil in anvils:
            anvil.mine(3)

        def confirmed() -> bool:
            rows = daemons[0].query(
                "SELECT count(*) FROM settlements WHERE verdict = 'FINALITY_CONFIRMED'"
            )
            return int(rows[0][0]) >= total

        wait_for(confirmed, 300, interval=0.02, what="every settlement confirmed")
        elapsed = time.perf_counter() - began
        spread = {n: str(o) for n, o in lease_owners(daemons[0]).items()}
        rows = daemons[0].query("SELECT count(*) FROM handoffs WHERE reason = 'expired'")
    return total / elapsed, spread, int(rows[0][0])


def _keep_log(daemon: Daemon, path: Path) -> None:
    """Copy a daemon's log out of the temporary directory (``--keep-logs``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(daemon.log())


def _ready(daemon: Daemon, timeout: float = 60.0) -> None:
    wait_for(
        lambda: _healthz(daemon),
        timeout,
        interval=0.05,
        what=f"{daemon.dir.name} answering",
    )


def _healthz(daemon: Daemon) -> bool:
    try:
        return daemon.get("/healthz").status_code in (200, 503)
    except Exception:  # not listening yet
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--lease", type=float, default=10.0, help="lease_s of the daemons")
    parser.add_argument("--txs", type=int, default=300)
    parser.add_argument("--only", choices=["failover", "throughput", "scaling"])
    parser.add_argument("--per-chain", type=int, default=150, help="settlements per chain")
    parser.add_argument(
        "--keep-logs", type=Path, help="copy the scaling daemons' logs into this directory"
    )
    args = parser.parse_args()
    if args.only == "scaling":
        rates: dict[int, float] = {}
        for n in (1, 2, 3):
            rates[n], spread, lapsed = scaling(n, args.per_chain, args.keep_logs)
            owners = ", ".join(f"{chain} -> {who}" for chain, who in sorted(spread.items()))
            print(
                f"scaling {n} instance(s): {rates[n]:7.1f} settlements/s "
                f"({3 * args.per_chain} over 3 chains), x{rates[n] / rates[1]:.2f} vs 1; "
                f"leases: {owners}; lapsed-lease takeovers: {lapsed}"
            )
        return
    if args.only in (None, "throughput"):
        for backend in ("sqlite", "postgresql"):
            with Anvil() as anvil:
                if backend == "sqlite":
                    store = fresh_store()
                    rate = throughput(anvil, store, args.txs, fenced=False)
                    store.close()
                else:
                    with pg_schema() as url:
                        store = Store.open(url)
                        rate = throughput(anvil, store, args.txs, fenced=True)
                        store.close()
            print(
                f"throughput {backend:<10}: {rate[0]:7.1f} settlements/s, "
                f"{rate[1]:7.1f} blocks/s ({args.txs} txs, one per block)"
            )
    if args.only in (None, "failover"):
        with Anvil("--block-time", "1") as anvil:
            kills, terms = failover(anvil, args.runs, args.lease)
        print(
            f"failover after kill -9 (lease {args.lease} s, {len(kills)} runs): "
            f"median {statistics.median(kills):.2f} s, p95 {p95(kills):.2f} s, "
            f"max {max(kills):.2f} s"
        )
        print(
            f"failover after SIGTERM ({len(terms)} runs): median "
            f"{statistics.median(terms) * 1000:.0f} ms, p95 {p95(terms) * 1000:.0f} ms, "
            f"max {max(terms) * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
