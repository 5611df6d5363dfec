"""Workflows: step writes per second and takeover latency, on SQLite and PostgreSQL.

``.venv/bin/python -m bench.workflows [--workflows 200] [--steps 10] [--clients 4]
[--connections 16] [--takeovers 20]``

A real daemon (``finality run``, a process of its own, over a real anvil) serves the API,
its chain as a user's config leaves it: polled at the shipped default for a local chain
(the registry's block time, 1 s; the test suite's daemons poll every 0.2 s, a fixed cost
of CPU a second that is not a step write's);
it is driven over loopback HTTP through workflows of its callers: every step begun (with an
idempotency key) then completed, so a step is two writes. Twice: by ``--connections``
keep-alive connections of a light generator (:mod:`bench.step_load`: raw HTTP/1.1,
pre-built requests, a few tens of microseconds of CPU a request: the daemon's figure), and
by ``--clients`` threads with the SDK's client (``FinalityClient``: what a user of the SDK
sees, the client's own CPU sharing the machine's cores with the daemon). Figures per store:

- **step writes/s over HTTP**: begins and completes answered per second of wall time
  (target ≥ 1,000 on SQLite, with the light generator), each with the daemon's CPU a write
  (``/proc/PID/stat``) and the generator's; and the same writes made in this process
  through the service
  (the daemon's parts built here over another store of the same kind, no HTTP): the write
  path's own share;
- in process also per second of CPU time: what one core gives, however busy the machine
  is with other work;
- the CPU a write costs through the whole API (the application ``finality run`` serves,
  called through ASGI in this process, no socket: middlewares, auth, validation, the route,
  the answer), the best of 5 workflows;
- **takeover latency**: a workflow whose lease has lapsed (a step in flight) taken over;
  the time from sending the request to its answer (the guard's verdict, recovery, four
  signed receipts), median and max of ``--takeovers`` (target: answered within 50 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench.api_cost import asgi_caller
from bench.api_cost import config as cost_config
from bench.step_load import step_load
from chains.registry import known_chain
from tests.conftest import fresh_pg_schema
from tests.support.anvil import Anvil, free_port
from tests.support.daemon import CHAIN_ID, Daemon, config_text, toml_value
from tests.support.sources_app import UNUSED_RPC, LiveApp
from watcher.api.server import create_app
from watcher.app.build import build
from watcher.client import FinalityClient
from watcher.config.loading import parse_config


def config_file(tmp: Path, store_url: str) -> Path:
    """A daemon config over ``store_url`` with a dev key and the unused chain."""
    chain = {"name": "local", "chain_id": 31337, "rpc": [UNUSED_RPC], "confirmations": 1}
    text = config_text(store_url, f"127.0.0.1:{free_port()}", chain)
    text += f"\n[signing]\ndev_key_file = {toml_value(str(tmp / 'dev-key'))}\n"
    path = tmp / "finality.toml"
    path.write_text(text)
    return path


def steps_of(count: int) -> list[str]:
    return [f"s{i}" for i in range(count)]


def drive(client: FinalityClient, workflows: int, steps: int) -> int:
    """Run ``workflows`` workflows of ``steps`` steps to the end; returns writes made."""
    writes = 0
    for _ in range(workflows):
        wf = client.start_workflow(steps_of(steps), "bench", 600)
        wid, token = wf["workflow_id"], wf["lock"]["fencing_token"]
        for step in steps_of(steps):
            client.begin_step(wid, step, token, "work", recovery={"idempotency_key": step})
            client.complete_step(wid, step, token, side_effects={"done": step})
            writes += 2
    return writes


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def http_writes(url: str, workflows: int, steps: int, clients: int) -> tuple[float, int]:
    """(step writes per second over HTTP, ``clients`` threads at once; writes made)."""
    per = max(1, workflows // clients)
    counts: list[int] = []
    lock = threading.Lock()

    def one() -> None:
        with FinalityClient(url) as client:
            done = drive(client, per, steps)
        with lock:
            counts.append(done)

    threads = [threading.Thread(target=one) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - started), sum(counts)


def service_writes(app: LiveApp, workflows: int, steps: int) -> tuple[float, float]:
    """(step writes per second through the service in process, no HTTP; per second of this
    process's CPU time: what one core gives, whatever else the machine runs)."""
    service = app.service.workflows
    writes = 0
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(workflows):
        view, _ = service.create("bench", steps_of(steps), "bench", 600, [], None)
        wid = view["workflow_id"]
        for step in steps_of(steps):
            service.steps.begin("bench", wid, step, 1, "work", {"idempotency_key": step})
            service.steps.complete("bench", wid, step, 1, {"done": step})
            writes += 2
    return writes / (time.perf_counter() - started), writes / (time.process_time() - cpu)


def asgi_writes(steps: int, rounds: int = 5) -> float:
    """CPU milliseconds per step write through the whole API in process (the application
    ``finality run`` serves, SQLite, called through ASGI without a socket, as
    :mod:`bench.api_cost` does): the best of ``rounds`` workflows."""
    with tempfile.TemporaryDirectory() as tmp:
        built = build(parse_config(cost_config(Path(tmp)), "<bench>"))
        call = asgi_caller(create_app(built))

        async def one() -> float:
            body = {"steps": steps_of(steps), "holder": "bench", "lease_s": 600}
            status, answer = await call("POST", "/v1/workflows", json.dumps(body).encode())
            assert status == 201, answer
            wid = json.loads(answer)["workflow_id"]
            cpu = time.process_time()
            for step in steps_of(steps):
                for verb, extra in (("begin", {"operation": "work"}), ("complete", {})):
                    request = json.dumps({"fencing_token": 1, **extra}).encode()
                    path = f"/v1/workflows/{wid}/steps/{step}/{verb}"
                    status, answer = await call("POST", path, request)
                    assert status == 200, answer
            return (time.process_time() - cpu) * 1000 / (2 * steps)

        try:
            return min(asyncio.run(one()) for _ in range(rounds))
        finally:
            built.stop()


def takeover_latency(url: str, samples: int) -> list[float]:
    """Milliseconds from sending a takeover of a lapsed lease to its answer."""
    out = []
    with FinalityClient(url) as client:
        for _ in range(samples):
            wf = client.start_workflow(["charge", "ship", "notify"], "a", 0.05)
            wid = wf["workflow_id"]
            client.begin_step(wid, "charge", 1, "charge", recovery={"idempotency_key": "k"})
            time.sleep(0.06)  # the lease lapses (wall clock: the real daemon)
            started = time.perf_counter()
            answer = client.take_over_workflow(wid, "b", 30)
            out.append((time.perf_counter() - started) * 1000)
            assert answer["fencing_token"] == 2, answer
    return out


def shipped_poll_s() -> float:
    """The poll interval a config without ``poll_interval_s`` gets for the local chain."""
    known = known_chain(CHAIN_ID)
    assert known is not None
    return known.block_time_s


def run(name: str, store_url: str, tmp: Path, anvil: Anvil, args: argparse.Namespace) -> None:
    poll_s = shipped_poll_s()
    daemon = Daemon(tmp / "daemon", anvil.url, store_url=store_url, poll_interval_s=poll_s)
    try:
        assert daemon.proc is not None
        pid = daemon.proc.pid
        drive(FinalityClient(daemon.url), 2, args.steps)  # warm up
        before = cpu_s(pid)
        light = step_load(daemon.url, args.workflows, args.steps, args.connections)
        light_daemon_ms = (cpu_s(pid) - before) * 1000 / light.writes
        before, mine = cpu_s(pid), time.process_time()
        http, writes = http_writes(daemon.url, args.workflows, args.steps, args.clients)
        sdk_daemon_ms = (cpu_s(pid) - before) * 1000 / writes
        client_ms = (time.process_time() - mine) * 1000 / writes
        latency = takeover_latency(daemon.url, args.takeovers)
    finally:
        daemon.close()
    local = tmp / "local"
    local.mkdir()
    with LiveApp(config_file(local, store_url)) as app:
        inproc, inproc_core = service_writes(app, max(1, args.workflows // 4), args.steps)
    print(
        f"{name}: step writes/s over HTTP, light generator ({args.connections} connections) "
        f"{light.per_second:,.0f} (the daemon's CPU {light_daemon_ms:.2f} ms a write, the "
        f"generator's {light.cpu_s * 1000 / light.writes:.2f} ms); with the SDK client "
        f"({args.clients} threads) {http:,.0f} (the daemon's CPU {sdk_daemon_ms:.2f} ms a "
        f"write, the clients' {client_ms:.2f} ms); in process {inproc:,.0f} (per CPU "
        f"second {inproc_core:,.0f}); takeover after lapse: median "
        f"{statistics.median(latency):.1f} ms, max {max(latency):.1f} ms "
        f"({len(latency)} takeovers); the daemon's chain polled every {poll_s:g} s (the "
        f"shipped default); load average {os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=200)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--takeovers", type=int, default=20)
    parser.add_argument("--only", choices=["sqlite", "postgresql"])
    args = parser.parse_args()
    print(
        f"through the whole API in process (ASGI, SQLite): {asgi_writes(args.steps):.2f} ms CPU a write"
    )
    with Anvil() as anvil, tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "sqlite"):
            base = Path(tmp) / "sqlite"
            base.mkdir()
            run("sqlite", f"sqlite:///{base}/f.db", base, anvil, args)
        if args.only in (None, "postgresql"):
            base = Path(tmp) / "postgresql"
            base.mkdir()
            with fresh_pg_schema("fw_bench_") as url:
                run("postgresql", url, base, anvil, args)


if __name__ == "__main__":
    main()
