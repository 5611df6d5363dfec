"""A million settlements on PostgreSQL: ``.venv/bin/python -m bench.pg_scale [--big 1000000]
[--small 10000] [--gets 3000] [--polls 40]``.

Two fresh schemas of the machine's PostgreSQL (127.0.0.1:5432) are filled in the same run by
bulk insert (``COPY`` through the store's own schema: tests/support/bulk_settlements.py),
one with ``--small`` settlements and one with ``--big``, a tenth of each still watched (the
others decided long ago). Against each, the same two figures:

- ``GET /v1/settlements/{id}`` on the application ``finality run`` serves (tokens on), driven
  through ASGI in this process one request at a time (as :mod:`bench.api_cost`), random ids
  of the stored set: median and p99 latency, and CPU per request;
- a poll of the chain watcher (the daemon's poller for one chain, over a real anvil, one new
  block each poll): median wall time and this process's CPU per poll (the store's reads,
  the tracker, the index of watched txs in memory), after the start that loads the watched
  set (timed apart);

and the peak RSS of this process with the big set's watched txs held (the daemon's
footprint is its poller's index plus the application). Target: at ``--big`` GET
p99 and a poll's CPU within 1.5x of the figures at ``--small``, RSS ≤ 400 MB. The ratios
are what this prints; absolute figures move with the machine's load (printed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from bench.api_cost import asgi_caller, config
from tests.conftest import fresh_pg_schema
from tests.support.anvil import Anvil
from tests.support.bulk_settlements import bulk_fill
from tests.support.rigs import make_watcher
from watcher.api.server import create_app
from watcher.app.build import build
from watcher.config.loading import parse_config


def peak_rss_mb() -> float:
    """This process's peak resident set (``VmHWM``), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def p99(values: list[float]) -> float:
    """The 99th percentile of ``values``."""
    return statistics.quantiles(values, n=100)[98]


def get_figures(url: str, stored: int, gets: int) -> dict[str, float]:
    """Fill the schema at ``url`` with ``stored`` settlements and time GETs of random ones."""
    tmp = Path(tempfile.mkdtemp(prefix="fw-pg-scale-"))
    service = build(parse_config(config(tmp, url), "<bench>"))
    try:
        started = time.perf_counter()
        chain = service.config.chain("local")
        bulk_fill(service.store, chain, stored, stored // 10, owner="bench")  # the token's caller
        fill_s = time.perf_counter() - started
        with service.store.reader.connect() as conn:
            ids = [
                r[0]
                for r in conn.execute(
                    text("SELECT settlement_id FROM settlements TABLESAMPLE SYSTEM (2) LIMIT :n"),
                    {"n": gets},
                )
            ]
        random.shuffle(ids)
        call = asgi_caller(create_app(service))

        async def run() -> tuple[list[float], float]:
            for sid in ids[:200]:  # warm up: connections, caches
                await call("GET", f"/v1/settlements/{sid}", b"")
            took = []
            cpu = time.process_time()
            for k in range(gets):
                t0 = time.perf_counter()
                status, body = await call("GET", f"/v1/settlements/{ids[k % len(ids)]}", b"")
                took.append(time.perf_counter() - t0)
                assert status == 200, body
            return took, (time.process_time() - cpu) / gets

        took, cpu_each = asyncio.run(run())
    finally:
        service.stop()
    return {
        "fill_s": fill_s,
        "get_median_ms": statistics.median(took) * 1e3,
        "get_p99_ms": p99(took) * 1e3,
        "get_cpu_us": cpu_each * 1e6,
    }


def poll_figures(url: str, polls: int) -> dict[str, float]:
    """A chain watcher over the filled schema: its start, then ``polls`` polls of one new
    block each."""
    with Anvil() as anvil:
        rig = make_watcher(anvil, url)
        try:
            started, cpu = time.perf_counter(), time.process_time()
            rig.watcher.poll()  # the start: the watched set into memory
            start_s, start_cpu = time.perf_counter() - started, time.process_time() - cpu
            walls, cpus = [], []
            for _ in range(polls):
                anvil.mine(1)
                rig.clock.advance(1)
                t0, c0 = time.perf_counter(), time.process_time()
                rig.watcher.poll()
                walls.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
            watched = len(rig.store.watch_entries(rig.config.name))
        finally:
            rig.store.close()
    return {
        "start_s": start_s,
        "start_cpu_s": start_cpu,
        "poll_ms": statistics.median(walls) * 1e3,
        "poll_cpu_ms": statistics.median(cpus) * 1e3,
        "watched": watched,
    }


def measure(stored: int, args: argparse.Namespace) -> dict[str, float]:
    """Both figures over a fresh schema holding ``stored`` settlements."""
    with fresh_pg_schema("fw_bench_") as url:
        figures = get_figures(url, stored, args.gets)
        figures.update(poll_figures(url, args.polls))
    figures["rss_mb"] = peak_rss_mb()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--big", type=int, default=1_000_000)
    parser.add_argument("--gets", type=int, default=3000)
    parser.add_argument("--polls", type=int, default=40)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    small = measure(args.small, args)
    big = measure(args.big, args)
    print(f"load average (1 min) {load:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    for label, f, stored in (("small", small, args.small), ("big", big, args.big)):
        print(
            f"{stored:>9,} stored ({f['watched']:,.0f} watched), filled in {f['fill_s']:.0f} s: "
            f"GET median {f['get_median_ms']:.2f} ms, p99 {f['get_p99_ms']:.2f} ms, "
            f"CPU {f['get_cpu_us']:.0f} us; poll {f['poll_ms']:.1f} ms, CPU "
            f"{f['poll_cpu_ms']:.1f} ms (start {f['start_s']:.1f} s, CPU "
            f"{f['start_cpu_s']:.1f} s); peak RSS so far {f['rss_mb']:.0f} MB ({label})"
        )
    print(
        f"big / small: GET p99 {big['get_p99_ms'] / small['get_p99_ms']:.2f}x, poll CPU "
        f"{big['poll_cpu_ms'] / small['poll_cpu_ms']:.2f}x (target ≤ 1.5x each), poll wall "
        f"time {big['poll_ms'] / small['poll_ms']:.2f}x (PostgreSQL's own work in it); "
        f"RSS {big['rss_mb']:.0f} MB (target ≤ 400 MB)"
    )


if __name__ == "__main__":
    main()
