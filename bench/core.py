"""Benchmarks of the core (the chain engine), run by hand: ``make bench`` or ``python -m bench.core``.

Every figure is printed beside a baseline measured in the same run:

* RPC calls per poll, steady state (one new block per poll, no watched tx in it, finality
  "depth"), with 1 / 1,000 / 100,000 watched txs, against the naive loop
  (``eth_getTransactionReceipt`` per watched tx + ``eth_blockNumber``), all counted by a
  JSON-RPC proxy in front of a real anvil;
* latency from the block that gives depth N to ``FINALITY_CONFIRMED`` with the real daemon
  scheduler, against the poll interval;
* catch-up after 10,000 missed blocks, against the time to merely fetch those blocks;
* peak RSS with 100,000 watched settlements, against the same process without them.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

from bench.common import (
    Anvil,
    chain_config,
    fresh_store,
    register_synthetic,
    started_service,
    watcher_for,
)
from bench.proxy import CountingProxy
from guard.settlement import Verdict

MS = 1_000_000


def calls_per_poll(anvil: Anvil, count: int, rounds: int) -> tuple[float, float]:
    """(ours, naive) JSON-RPC calls per poll with ``count`` watched txs."""
    proxy = CountingProxy(anvil.url)
    try:
        chain = chain_config(proxy.url)
        store = fresh_store()
        hashes = register_synthetic(store, chain, count)
        # A clock that moves one poll interval (1 s) per poll, so that time-driven work
        # (re-probing still-unseen txs within its budget) counts as it would in a real run.
        polls = [0]
        start = time.time_ns() // MS
        watcher = watcher_for(store, chain, clock=lambda: start + 1000 * polls[0])
        while watcher.poll().probes:  # first look-up of each new registration: not steady state
            polls[0] += 1
        watcher.poll()
        before = proxy.total()
        for _ in range(rounds):
            polls[0] += 1
            anvil.mine(1)
            watcher.poll()
        ours = (proxy.total() - before) / rounds

        naive_rounds = min(rounds, 10) if count <= 1000 else 1
        client = watcher.client
        before = proxy.total()
        for _ in range(naive_rounds):
            anvil.mine(1)
            client.call("eth_blockNumber")
            if count <= 1000:
                for h in hashes:
                    client.call("eth_getTransactionReceipt", [h])
            else:  # same calls, sent batched so the run stays short; the count is what matters
                client.receipts(hashes)
        naive = (proxy.total() - before) / naive_rounds
        store.close()
        return ours, naive
    finally:
        proxy.close()


def finality_latency(anvil: Anvil, samples: int, interval_s: float) -> list[float]:
    """Seconds from mining the block that gives depth N to the stored verdict."""
    from watcher.settlements import Registration, register

    chain = chain_config(anvil.url, poll_interval_s=interval_s)
    service = started_service(chain)
    latencies = []
    try:
        for i in range(samples):
            tx = anvil.send()
            anvil.receipt(tx)
            rec, _ = register(service.store, Registration(chain, tx), time.time_ns() // MS)
            anvil.mine(1)  # depth 2
            time.sleep(interval_s * (0.3 + 0.6 * (i % 5) / 5))  # land at varied phases
            anvil.mine(1)  # depth 3 = N
            mined = time.monotonic()
            while service.store.settlement(rec.settlement_id).verdict != Verdict.FINALITY_CONFIRMED:
                if time.monotonic() - mined > 10 * interval_s + 5:
                    raise RuntimeError("verdict never came")
                time.sleep(0.005)
            latencies.append(time.monotonic() - mined)
    finally:
        service.stop()
    return latencies


def catch_up(anvil: Anvil, missed: int) -> tuple[float, float]:
    """(seconds to catch up ``missed`` blocks, seconds to just fetch them in batches)."""
    chain = chain_config(anvil.url, max_blocks_per_poll=1000)
    store = fresh_store()
    watcher = watcher_for(store, chain)
    watcher.poll()
    start_head = anvil.head()
    for _ in range(0, missed, 1000):
        anvil.mine(min(1000, missed))
    restarted = watcher_for(store, chain)
    started = time.monotonic()
    stats = restarted.catch_up(max_rounds=10_000)
    ours = time.monotonic() - started
    assert restarted.head is not None and restarted.head.number == anvil.head(), stats
    started = time.monotonic()
    numbers = list(range(start_head + 1, start_head + missed + 1))
    for i in range(0, len(numbers), 1000):
        restarted.client.blocks(numbers[i : i + 1000], full=True)
    fetch_only = time.monotonic() - started
    store.close()
    return ours, fetch_only


def rss_child(url: str, db_url: str) -> None:
    """In a child process: start a watcher over the store ``db_url``, print peak RSS (MB)."""
    from chains.rpc import connect
    from watcher.engine.chain_watcher import ChainWatcher
    from watcher.store import Store

    watcher = ChainWatcher(chain_config(url), Store.open(db_url), connect(url))
    watcher.start()
    watcher.poll()
    print(f"{_peak_rss_mb():.1f} {len(watcher.index.by_id)}")


def _peak_rss_mb() -> float:
    """This process's own peak RSS: ``VmHWM`` of its memory map, which starts anew at exec.
    ``ru_maxrss`` keeps the peak from before the exec, i.e. the forking parent's size: run
    after the other benchmarks (100,000 settlements in the parent) it printed the parent's
    289 MB for both children."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # not Linux


def memory(anvil: Anvil, count: int) -> tuple[float, float, int]:
    """(peak RSS with ``count`` watched, peak RSS with none) in MB, and the count loaded."""

    def run(n: int) -> tuple[float, int]:
        store = fresh_store()
        register_synthetic(store, chain_config(anvil.url), n)
        store.close()
        out = subprocess.run(
            [sys.executable, "-m", "bench.core", "--rss-child", anvil.url, store.url],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        return float(out[0]), int(out[1])

    with_count, loaded = run(count)
    empty, _ = run(0)
    return with_count, empty, loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller counts, for a smoke run")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=["calls", "latency", "catchup", "memory"],
        default=["calls", "latency", "catchup", "memory"],
        help="run only these sections",
    )
    parser.add_argument("--rss-child", nargs=2, metavar=("URL", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.rss_child[0], args.rss_child[1])
        return
    big = 10_000 if args.quick else 100_000
    with Anvil() as anvil:
        if "calls" in args.only:
            print("== steady-state JSON-RPC calls per poll (one new block per poll), target <= 1.2")
        for count in (1, 1000, big) if "calls" in args.only else ():
            ours, naive = calls_per_poll(anvil, count, rounds=120)
            print(
                f"  {count:>7} watched: ours {ours:6.2f}   naive {naive:9.1f}   ratio {naive / ours:9.1f}x"
            )

        interval = 1.0
        if "latency" in args.only:
            print(
                f"== depth-N block -> FINALITY_CONFIRMED, poll interval {interval:.1f} s, target median <= {interval + 0.1:.1f} s"
            )
            lat = finality_latency(anvil, samples=5 if args.quick else 15, interval_s=interval)
            print(
                f"  median {statistics.median(lat):.3f} s  max {max(lat):.3f} s  "
                f"(ratio to interval {statistics.median(lat) / interval:.2f})"
            )

        missed = 2_000 if args.quick else 10_000
        if "catchup" in args.only:
            print(f"== catch-up after {missed} missed blocks, target <= 30 s")
            ours, fetch = catch_up(anvil, missed)
            print(
                f"  ours {ours:.1f} s   fetching the blocks alone {fetch:.1f} s   ratio {ours / fetch:.2f}"
            )

        if "memory" in args.only:
            print(f"== peak RSS with {big} watched settlements, target <= 300 MB")
            rss, empty, loaded = memory(anvil, big)
            print(
                f"  ours {rss:.0f} MB ({loaded} loaded)   same process with none {empty:.0f} MB   "
                f"per settlement {(rss - empty) * 1024 / max(loaded, 1):.2f} KB"
            )


if __name__ == "__main__":
    main()
