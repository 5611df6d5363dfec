"""Many chains: ``.venv/bin/python -m bench.many_chains [--chains 16] [--seconds 30]
[--instances 3] [--lease 6] [--per-chain 4] [--only one shared]``.

``--chains`` anvil nodes, each mining a block a second (distinct chain ids), and PostgreSQL
(127.0.0.1:5432, a fresh schema per part).

- ``one``: one daemon follows every chain, each behind a counting proxy (bench/proxy.py), for
  ``--seconds``: JSON-RPC calls per new block per chain and the daemon's CPU per chain (from
  /proc), beside the same daemon configuration following one chain alone in the same run
  (the baseline: calls per block per chain must not grow with the number of chains).
- ``shared``: ``--instances`` daemons share the chains by leases (``lease_s = --lease``).
  Once the leases have spread, settlements are registered (``--per-chain`` a chain, before
  and after the kill, round-robin over the live daemons, each a tx sent to its chain), the
  daemon holding the most chains is killed with SIGKILL, and the figures are the time until
  every chain is held again by a live daemon (target: within the lease time), and, once
  every settlement is confirmed, counted in the store: settlements per registered tx (1: none
  lost, none duplicated) and ``settlement_confirmed`` events per settlement (1).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.api_load import cpu_s
from bench.proxy import CountingProxy
from tests.conftest import fresh_pg_schema
from tests.e2e.handoff_helpers import live_spread, pg_multi_daemon
from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, wait_for

BENCH_KEY = "0x" + "5e" * 32
"""Signing key of the daemons (chain ids other than 31337 and 1337 are not dev chains)."""
POLL_S = 1.0
"""Each chain's poll interval: a block a second (the daemon paces polls to the blocks)."""


def chain_ids(count: int) -> list[tuple[str, int]]:
    """(name, chain id) of ``count`` chains, the first the daemon's own ``local``."""
    return [("local", 31337)] + [(f"c{k}", 40_000 + k) for k in range(1, count)]


@contextlib.contextmanager
def nodes(count: int) -> Iterator[list[Anvil]]:
    """``count`` anvils mining a block a second, stopped at the end."""
    with contextlib.ExitStack() as stack:
        yield [
            stack.enter_context(Anvil("--block-time", "1", "--chain-id", str(cid)))
            for _, cid in chain_ids(count)
        ]


def _ready(daemon: Daemon, timeout: float = 90.0) -> None:
    def answers() -> bool:
        try:
            return daemon.get("/healthz").status_code in (200, 503)
        except Exception:  # not listening yet
            return False

    wait_for(answers, timeout, interval=0.1, what=f"{daemon.dir.name} answering")


def follow(anvils: list[Anvil], seconds: float, work: Path) -> dict[str, float]:
    """One daemon following ``anvils`` through counting proxies for ``seconds`` (after its
    start): calls per new block per chain, and its CPU per chain."""
    proxies = [CountingProxy(a.url) for a in anvils]
    chains = [(n, cid, p.url) for (n, cid), p in zip(chain_ids(len(anvils)), proxies, strict=True)]
    with fresh_pg_schema("fw_bench_") as url:
        daemon = pg_multi_daemon(work, chains, url, f"one{len(anvils)}", poll_interval_s=POLL_S)
        try:
            daemon.spawn()
            _ready(daemon)
            time.sleep(5)  # past the start: first heads, catching up
            assert daemon.proc is not None
            pid = daemon.proc.pid
            heads = [a.head() for a in anvils]
            calls = [p.total() for p in proxies]
            cpu = cpu_s(pid)
            time.sleep(seconds)
            cpu = cpu_s(pid) - cpu
            blocks = [a.head() - h for a, h in zip(anvils, heads, strict=True)]
            spent = [p.total() - c for p, c in zip(proxies, calls, strict=True)]
        finally:
            daemon.close()
            for p in proxies:
                p.close()
    per_block = [c / max(1, b) for c, b in zip(spent, blocks, strict=True)]
    return {
        "calls_per_block": statistics.mean(per_block),
        "worst_calls_per_block": max(per_block),
        "cpu_per_chain": cpu / seconds / len(anvils),
    }


def shared(anvils: list[Anvil], args: argparse.Namespace, work: Path) -> dict[str, float]:
    """``args.instances`` daemons sharing the chains; kill -9 of the busiest (see the doc)."""
    names = [n for n, _ in chain_ids(len(anvils))]
    chains = [(n, cid, a.url) for (n, cid), a in zip(chain_ids(len(anvils)), anvils, strict=True)]
    with fresh_pg_schema("fw_bench_") as url, contextlib.ExitStack() as stack:
        daemons = {
            f"I{k + 1}": pg_multi_daemon(
                work,
                chains,
                url,
                f"I{k + 1}",
                lease_s=args.lease,
                renew_s=args.lease / 6,
                poll_interval_s=POLL_S,
            )
            for k in range(args.instances)
        }
        for d in daemons.values():
            stack.callback(d.close)
        first, *others = daemons.values()
        first.spawn()  # it migrates the fresh schema alone
        _ready(first)
        for d in others:
            d.spawn()
        for d in others:
            _ready(d)
        even = len(anvils) // args.instances
        wait_for(
            lambda: (
                len(live_spread(first)) == args.instances
                and min(live_spread(first).values()) >= even
            ),
            120,
            interval=0.5,
            what="the chains spread over the instances",
        )
        sent: list[tuple[str, str]] = []

        def register_round(live: list[Daemon]) -> None:
            for k, (name, anvil) in enumerate(zip(names, anvils, strict=True)):
                tx = anvil.send()
                live[(len(sent) + k) % len(live)].register(tx, chain=name)
                sent.append((name, tx.lower()))

        for _ in range(args.per_chain // 2):
            register_round(list(daemons.values()))
        spread = live_spread(first)
        victim_name = max(spread, key=lambda who: spread[who])
        victim = daemons[victim_name]
        survivors = [d for n, d in daemons.items() if n != victim_name]
        victim.kill9()
        killed = time.monotonic()
        wait_for(
            lambda: (
                victim_name not in live_spread(survivors[0])
                and sum(live_spread(survivors[0]).values()) == len(anvils)
            ),
            args.lease * 4 + 30,
            interval=0.05,
            what="every chain held by a survivor",
        )
        moved_s = time.monotonic() - killed
        for _ in range(args.per_chain - args.per_chain // 2):
            register_round(survivors)
        total = len(sent)

        def all_confirmed() -> bool:
            rows = survivors[0].query(
                "SELECT count(*) FROM settlements WHERE verdict = 'FINALITY_CONFIRMED'"
            )
            return int(rows[0][0]) >= total

        wait_for(all_confirmed, 300, interval=0.5, what="every settlement confirmed")
        rows = survivors[0].query("SELECT chain, tx_hash FROM settlements")
        stored = sorted((str(c), str(h).lower()) for c, h in rows)
        events = survivors[0].query(
            "SELECT settlement_id, count(*) FROM events WHERE kind = 'settlement_confirmed' "
            "GROUP BY settlement_id"
        )
    counts = [int(n) for _, n in events]
    return {
        "held_by_victim": spread[victim_name],
        "moved_s": moved_s,
        "registered": total,
        "stored": len(stored),
        "lost": len(set(sent) - set(stored)),
        "duplicated": len(stored) - len(set(stored)),
        "confirmed_events": sum(counts),
        "settlements_with_events": len(counts),
        "max_events_per_settlement": max(counts, default=0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--lease", type=float, default=6.0, help="lease_s of the daemons")
    parser.add_argument("--per-chain", type=int, default=4, help="settlements per chain")
    parser.add_argument("--only", choices=["one", "shared"])
    args = parser.parse_args()
    os.environ.setdefault("FINALITY_SIGNING_KEY", BENCH_KEY)
    work = Path(tempfile.mkdtemp(prefix="fw-bench-chains-"))
    load = os.getloadavg()[0]
    with nodes(args.chains) as anvils:
        if args.only in (None, "one"):
            alone = follow(anvils[:1], args.seconds, work / "alone")
            many = follow(anvils, args.seconds, work / "many")
            print(
                f"one instance, {args.chains} chains at a block a second: "
                f"{many['calls_per_block']:.2f} calls per block per chain (worst chain "
                f"{many['worst_calls_per_block']:.2f}), CPU {many['cpu_per_chain'] * 100:.1f}% "
                f"of a core per chain; one chain alone (same run): "
                f"{alone['calls_per_block']:.2f} calls per block, CPU "
                f"{alone['cpu_per_chain'] * 100:.1f}% of a core"
            )
        if args.only in (None, "shared"):
            f = shared(anvils, args, work / "shared")
            print(
                f"{args.instances} instances sharing {args.chains} chains, lease {args.lease} s: "
                f"kill -9 of the holder of {f['held_by_victim']:.0f} chains, every chain held "
                f"again after {f['moved_s']:.1f} s (bound: lease + renewal "
                f"{args.lease * 7 / 6:.1f} s); {f['registered']:.0f} settlements "
                f"registered, {f['stored']:.0f} stored, {f['lost']:.0f} lost, "
                f"{f['duplicated']:.0f} duplicated; settlement_confirmed events "
                f"{f['confirmed_events']:.0f} over {f['settlements_with_events']:.0f} "
                f"settlements (at most {f['max_events_per_settlement']:.0f} each)"
            )
    print(f"load average (1 min) {load:.1f} at start, {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
