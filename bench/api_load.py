"""API under load, auth on: ``.venv/bin/python -m bench.api_load [--seconds 10] [--settlements 2000]``.

The daemon runs as shipped (``finality run``, SQLite, one anvil chain) with two bearer
tokens configured, and every request below carries one. Load comes from ``wrk`` (C, one
thread, keep-alive: it takes a fraction of a core, so the daemon has the rest) when it is on
PATH (Debian: ``apt-get install wrk``), else the run stops and says so: a Python load
generator on the same two cores would measure itself.

Figures, each beside a baseline measured in the same run:

- ``GET /v1/settlements/{id}`` (random ids of the registered set) req/s and p99, beside
  ``GET /healthz`` (the framework's floor: routing, auth, JSON, no store read);
- registrations per second through ``POST /v1/settlements/batch`` (1,000 a request, a few
  connections), beside one ``POST /v1/settlements`` a request;
- the daemon's RSS before and after (it must stay flat).

Targets (issue 14): GET ≥ 1,500 req/s with p99 ≤ 50 ms; ≥ 5,000 registrations/s via batch.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx

from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon

TOKEN = "bench-" + secrets.token_hex(16)
READER = "bench-reader-" + secrets.token_hex(16)
TOKENS = f"""
[[api.tokens]]
name = "bench"
token = "{TOKEN}"
scopes = ["read", "register"]

[[api.tokens]]
name = "reader"
token = "{READER}"
scopes = ["read"]
"""
AUTH = {"Authorization": f"Bearer {TOKEN}"}

LUA_GET = """
ids = {%s}
request = function()
  return wrk.format("GET", "/v1/settlements/" .. ids[math.random(#ids)])
end
"""


def rss_mb(pid: int) -> float:
    """The resident set of a process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def tx_hashes(count: int) -> list[str]:
    """``count`` random, never broadcast tx hashes (registration does not need them sent)."""
    return ["0x" + secrets.token_hex(32) for _ in range(count)]


def wrk(
    url: str, seconds: int, connections: int, script: Path | None = None
) -> tuple[float, float]:
    """(requests per second, p99 latency in ms) of a wrk run with the bench token."""
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency"]
    command += ["-H", f"Authorization: Bearer {TOKEN}"]
    if script is not None:
        command += ["-s", str(script)]
    out = subprocess.run([*command, url], capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p99, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non_2xx:
        raise SystemExit(f"wrk saw {non_2xx.group(1)} failed answers:\n{out}")
    return rate, float(p99) * scale


def batch_rate(url: str, total: int, per_request: int, threads: int) -> float:
    """Registrations per second through the batch route, ``threads`` connections at once."""
    hashes = tx_hashes(total)
    chunks = [hashes[i : i + per_request] for i in range(0, total, per_request)]
    lock = threading.Lock()
    problems: list[str] = []

    def worker() -> None:
        with httpx.Client(base_url=url, headers=AUTH, timeout=60) as client:
            while True:
                with lock:
                    if not chunks:
                        return
                    chunk = chunks.pop()
                items = [{"chain": CHAIN, "tx_hash": h} for h in chunk]
                answer = client.post("/v1/settlements/batch", json={"items": items})
                if answer.status_code != 200:
                    problems.append(f"{answer.status_code} {answer.text[:200]}")

    started = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - started
    if problems:
        raise SystemExit(f"batch registration failed: {problems[:3]}")
    return total / elapsed


def single_rate(url: str, total: int) -> float:
    """Registrations per second, one ``POST /v1/settlements`` each, one connection."""
    with httpx.Client(base_url=url, headers=AUTH, timeout=30) as client:
        started = time.perf_counter()
        for h in tx_hashes(total):
            answer = client.post("/v1/settlements", json={"chain": CHAIN, "tx_hash": h})
            assert answer.status_code == 201, answer.text
        return total / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--settlements", type=int, default=2000, help="registered before the GETs")
    parser.add_argument("--batch-total", type=int, default=20000)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not on PATH (Debian: apt-get install wrk)")
    work = Path(tempfile.mkdtemp(prefix="fw-bench-api-"))
    load_start = os.getloadavg()[0]  # the machine's other work: the figures scale with it
    with Anvil() as anvil:
        daemon = Daemon(work, anvil.url, extra_config=TOKENS, poll_interval_s=1.0)
        try:
            assert daemon.proc is not None
            pid = daemon.proc.pid
            rss_start = rss_mb(pid)
            ids = []
            with httpx.Client(base_url=daemon.url, headers=AUTH, timeout=60) as client:
                for _start in range(0, args.settlements, 1000):
                    items = [{"chain": CHAIN, "tx_hash": h} for h in tx_hashes(1000)]
                    answer = client.post("/v1/settlements/batch", json={"items": items})
                    answer.raise_for_status()
                    ids += [r["settlement"]["settlement_id"] for r in answer.json()["results"]]
            script = work / "get.lua"
            script.write_text(LUA_GET % ",".join(json.dumps(i) for i in ids))
            health_rate, health_p99 = wrk(daemon.url + "/healthz", args.seconds, args.connections)
            get_rate, get_p99 = wrk(daemon.url, args.seconds, args.connections, script)
            single = single_rate(daemon.url, 500)
            batch = batch_rate(daemon.url, args.batch_total, 1000, threads=2)
            rss_end = rss_mb(pid)
            load_end = os.getloadavg()[0]
        finally:
            daemon.close()
    print(
        f"load average (1 min) {load_start:.1f} at start, {load_end:.1f} at end ({os.cpu_count()} cores)"
    )
    print(
        f"GET /v1/settlements/{{id}}: {get_rate:,.0f} req/s, p99 {get_p99:.1f} ms (target ≥ 1,500, ≤ 50 ms)"
    )
    print(
        f"  baseline GET /healthz: {health_rate:,.0f} req/s, p99 {health_p99:.1f} ms "
        f"(settlement read at {get_rate / health_rate:.2f}x the framework's floor)"
    )
    print(
        f"registrations via batch: {batch:,.0f}/s (target ≥ 5,000); one per request: "
        f"{single:,.0f}/s (batch {batch / single:.1f}x)"
    )
    print(
        f"daemon RSS: {rss_start:.0f} MB at start, {rss_end:.0f} MB after "
        f"{args.settlements + args.batch_total + 500:,} registrations and the GETs"
    )


if __name__ == "__main__":
    main()
