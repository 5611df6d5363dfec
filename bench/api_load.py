"""API under load, auth on: ``.venv/bin/python -m bench.api_load [--seconds 10] [--settlements 2000]
[--store sqlite|postgresql] [--instances 1|2]``.

``--batch-only`` skips the GETs; ``--profile-batch FILE`` records the daemon with py-spy
(raw folded stacks) during the batches, ``--profile-get FILE`` during the GETs of one
instance (each stack under the thread holding the GIL: what keeps the event loop from
running while a GET's answer is late).

The daemon runs as shipped (``finality run``, SQLite, one anvil chain) with two bearer
tokens configured, and every request below carries one. Load comes from ``wrk`` (C, one
thread, keep-alive: it takes a fraction of a core, so the daemon has the rest) when it is on
PATH (Debian: ``apt-get install wrk``), else the run stops and says so: a Python load
generator on the same two cores would measure itself.

Figures, each beside a baseline measured in the same run:

- ``GET /v1/settlements/{id}`` (random ids of the registered set) req/s and p99, beside
  ``GET /healthz`` (the framework's floor: routing, auth, JSON, no store read);
- registrations per second through ``POST /v1/settlements/batch`` (1,000 a request, two
  keep-alive connections posting bodies encoded before the clock starts, answers checked by
  a byte count of their 201s: the generator shares the daemon's cores) and the daemon's CPU
  per 1,000 (from /proc: what the daemon costs, much less disturbed by the machine's load),
  beside one ``POST /v1/settlements`` a request;
- the daemon's RSS before and after (it must stay flat).

``--store postgresql`` runs the daemon on a fresh schema of the machine's PostgreSQL
(127.0.0.1:5432, as the tests' ``pg_url``). ``--instances 2`` (PostgreSQL) starts two
daemons sharing that store and measures GETs and batches first against one of them, then
round-robin over both (a wrk, or a batch connection, per instance, at once: the balancing a
client-side or DNS round-robin does, without a balancer process taking a share of the two
cores): the ratio of the two is the second instance's gain.

Targets: GET ≥ 1,500 req/s with p99 ≤ 50 ms; ≥ 5,000 registrations/s via batch.
On PostgreSQL: the same, and two instances ≥ 1.6x one.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from tests.conftest import fresh_pg_schema
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


def batch_bodies(total: int, per_request: int) -> list[bytes]:
    """The batch requests of ``total`` new registrations, JSON-encoded before any clock
    starts: the load generator shares the daemon's two cores, so it must not spend them
    building and encoding 1,000 item dicts a request."""
    hashes = tx_hashes(total)
    return [
        json.dumps(
            {"items": [{"chain": CHAIN, "tx_hash": h} for h in hashes[i : i + per_request]]},
            separators=(",", ":"),
        ).encode()
        for i in range(0, total, per_request)
    ]


def batch_rate(urls: list[str], total: int, per_request: int, connections: int) -> float:
    """Registrations per second through the batch route, ``connections`` at once (spread
    over ``urls`` in turn), each a keep-alive ``http.client`` connection posting pre-encoded
    bodies. An answer is checked by its status and its count of 201 results (a byte count,
    not a parse of ~800 KB)."""
    bodies = batch_bodies(total, per_request)
    sizes = [body.count(b'"tx_hash"') for body in bodies]
    headers = {**AUTH, "Content-Type": "application/json"}
    lock = threading.Lock()
    todo = list(range(len(bodies)))
    problems: list[str] = []

    def worker(url: str) -> None:
        address = urlsplit(url)
        conn = http.client.HTTPConnection(
            address.hostname or "127.0.0.1", address.port, timeout=120
        )
        try:
            while True:
                with lock:
                    if not todo:
                        return
                    k = todo.pop()
                conn.request("POST", "/v1/settlements/batch", bodies[k], headers)
                answer = conn.getresponse()
                data = answer.read()
                created = data.count(b'"status":201')
                if answer.status != 200 or created != sizes[k]:
                    problems.append(f"{answer.status}, {created} of {sizes[k]} 201: {data[:200]!r}")
        finally:
            conn.close()

    started = time.perf_counter()
    pool = [
        threading.Thread(target=worker, args=(urls[k % len(urls)],)) for k in range(connections)
    ]
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


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used: the daemon's cost, whatever else
    the machine runs (the rates above scale with the load, this much less)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def profiled(
    pid: int, out: Path | None, how: tuple[str, ...] = ("--gil",)
) -> subprocess.Popen[bytes] | None:
    """py-spy recording the daemon (raw folded stacks into ``out``) until stopped: by
    default the thread holding the GIL (where the CPU goes)."""
    if out is None:
        return None
    spy = Path(sys.executable).with_name("py-spy")
    command = [str(spy), "record", "--pid", str(pid), "--nonblocking", *how, "-r", "100"]
    return subprocess.Popen([*command, "-f", "raw", "-o", str(out)], stdout=subprocess.DEVNULL)


def stop(spy: subprocess.Popen[bytes] | None) -> None:
    """Stop a py-spy recording (it writes its file on SIGINT)."""
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=60)


def batch_phase(urls: list[str], pids: list[int], args: argparse.Namespace) -> dict[str, float]:
    """Registrations a second via the batch route, and the daemons' CPU per 1,000: against
    the first instance, then (several instances) round-robin over all."""
    spy = profiled(pids[0], args.profile_batch)
    cpu_before = cpu_s(pids[0])
    rate = batch_rate(urls[:1], args.batch_total, 1000, args.batch_connections)
    cpu = cpu_s(pids[0]) - cpu_before
    stop(spy)
    out = {"batch": rate, "batch_cpu_ms": cpu * 1e3 / (args.batch_total / 1000)}
    if len(urls) > 1:
        connections = max(args.batch_connections, len(urls))
        cpu_before = sum(cpu_s(p) for p in pids)
        out["batch_rr"] = batch_rate(urls, args.batch_total, 1000, connections)
        spent = sum(cpu_s(p) for p in pids) - cpu_before
        out["batch_rr_cpu_ms"] = spent * 1e3 / (args.batch_total / 1000)
    return out


def wrk_round_robin(
    urls: list[str], seconds: int, connections: int, script: Path
) -> tuple[float, float]:
    """(requests per second, p99 ms) of one wrk per instance at once, the connections
    shared out: the sum of the rates, the worst p99."""
    share = max(1, connections // len(urls))
    with ThreadPoolExecutor(len(urls)) as pool:
        runs = list(pool.map(lambda u: wrk(u, seconds, share, script), urls))
    return sum(r for r, _ in runs), max(p for _, p in runs)


def get_phase(
    urls: list[str], pids: list[int], work: Path, args: argparse.Namespace
) -> dict[str, float]:
    """The GET figures (wrk), after registering ``args.settlements`` to read: against the
    first instance, then (several instances) round-robin over all; with the daemons' CPU
    per request (on a saturated machine a second instance cannot add cores, but its
    requests must not cost more)."""
    url = urls[0]
    ids = []
    with httpx.Client(base_url=url, headers=AUTH, timeout=60) as client:
        for _start in range(0, args.settlements, 1000):
            items = [{"chain": CHAIN, "tx_hash": h} for h in tx_hashes(1000)]
            answer = client.post("/v1/settlements/batch", json={"items": items})
            answer.raise_for_status()
            ids += [r["settlement"]["settlement_id"] for r in answer.json()["results"]]
    script = work / "get.lua"
    script.write_text(LUA_GET % ",".join(json.dumps(i) for i in ids))
    health_rate, health_p99 = wrk(url + "/healthz", args.seconds, args.connections)
    cpu = sum(cpu_s(p) for p in pids)
    spy = profiled(pids[0], args.profile_get, ("--gil", "--threads"))
    get_rate, get_p99 = wrk(url, args.seconds, args.connections, script)
    stop(spy)
    out = {"health": health_rate, "health_p99": health_p99, "get": get_rate, "get_p99": get_p99}
    out["get_cpu_us"] = (sum(cpu_s(p) for p in pids) - cpu) * 1e6 / (get_rate * args.seconds)
    if len(urls) > 1:
        cpu = sum(cpu_s(p) for p in pids)
        out["get_rr"], out["get_rr_p99"] = wrk_round_robin(
            urls, args.seconds, args.connections, script
        )
        spent = sum(cpu_s(p) for p in pids) - cpu
        out["get_rr_cpu_us"] = spent * 1e6 / (out["get_rr"] * args.seconds)
    return out


def report(f: dict[str, float], registered: int) -> None:
    """Print the figures of a run (see the module doc)."""
    print(f"load average (1 min) {f['load_start']:.1f} at start, {f['load_end']:.1f} at end")
    if "get" in f:
        print(
            f"GET /v1/settlements/{{id}}: {f['get']:,.0f} req/s, p99 {f['get_p99']:.1f} ms "
            f"(target ≥ 1,500, ≤ 50 ms), daemon CPU {f['get_cpu_us']:.0f} us a request"
        )
        print(
            f"  baseline GET /healthz: {f['health']:,.0f} req/s, p99 {f['health_p99']:.1f} ms "
            f"(settlement read at {f['get'] / f['health']:.2f}x the framework's floor)"
        )
    print(
        f"registrations via batch: {f['batch']:,.0f}/s (target ≥ 5,000), daemon CPU "
        f"{f['batch_cpu_ms']:.0f} ms per 1,000; one per request: {f['single']:,.0f}/s "
        f"(batch {f['batch'] / f['single']:.1f}x)"
    )
    if "get_rr" in f:
        print(
            f"  round-robin over {f['instances']:.0f} instances: {f['get_rr']:,.0f} req/s, "
            f"p99 {f['get_rr_p99']:.1f} ms ({f['get_rr'] / f['get']:.2f}x one instance; "
            f"target ≥ 1.6x), daemons' CPU {f['get_rr_cpu_us']:.0f} us a request"
        )
    if "batch_rr" in f:
        print(
            f"  batch round-robin over {f['instances']:.0f} instances: {f['batch_rr']:,.0f}/s "
            f"({f['batch_rr'] / f['batch']:.2f}x one instance), daemons' CPU "
            f"{f['batch_rr_cpu_ms']:.0f} ms per 1,000"
        )
    print(
        f"daemon RSS: {f['rss_start']:.0f} MB at start, {f['rss_end']:.0f} MB after "
        f"{registered:,} registrations and the GETs ({os.cpu_count()} cores)"
    )


@contextmanager
def daemons(work: Path, anvil_url: str, args: argparse.Namespace) -> Iterator[list[Daemon]]:
    """``args.instances`` daemons on one store (SQLite: the first's own file; PostgreSQL: a
    fresh schema they share), closed and the schema dropped at the end."""
    with ExitStack() as stack:
        url = stack.enter_context(fresh_pg_schema("fw_bench_")) if args.store != "sqlite" else None
        running = []
        for k in range(args.instances):
            daemon = Daemon(
                work / f"d{k}", anvil_url, store_url=url, extra_config=TOKENS, poll_interval_s=1.0
            )
            stack.callback(daemon.close)
            running.append(daemon)
        yield running


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--settlements", type=int, default=2000, help="registered before the GETs")
    parser.add_argument("--batch-total", type=int, default=20000)
    parser.add_argument("--batch-connections", type=int, default=2)
    parser.add_argument("--batch-only", action="store_true", help="skip the GETs (no wrk)")
    parser.add_argument("--profile-batch", type=Path, help="py-spy raw stacks of the batches")
    parser.add_argument("--profile-get", type=Path, help="py-spy raw stacks of the GETs")
    parser.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--instances", type=int, choices=[1, 2], default=1)
    args = parser.parse_args()
    if args.instances > 1 and args.store == "sqlite":
        raise SystemExit("--instances 2 shares one store: use --store postgresql")
    if not args.batch_only and shutil.which("wrk") is None:
        raise SystemExit("wrk is not on PATH (Debian: apt-get install wrk)")
    work = Path(tempfile.mkdtemp(prefix="fw-bench-api-"))
    figures = {"load_start": os.getloadavg()[0], "instances": args.instances}
    with Anvil() as anvil, daemons(work, anvil.url, args) as running:
        pids = [d.proc.pid for d in running if d.proc is not None]
        urls = [d.url for d in running]
        figures["rss_start"] = rss_mb(pids[0])
        if not args.batch_only:
            figures.update(get_phase(urls, pids, work, args))
        figures["single"] = single_rate(urls[0], 500)
        figures.update(batch_phase(urls, pids, args))
        figures["rss_end"] = max(rss_mb(pid) for pid in pids)
        figures["load_end"] = os.getloadavg()[0]  # the machine's other work: figures scale
    print(f"store {args.store}, {args.instances} instance(s)")
    gets = 0 if args.batch_only else args.settlements
    report(figures, gets + args.batch_total + 500)


if __name__ == "__main__":
    main()
