"""The API's cost per request, in process: ``.venv/bin/python -m bench.api_cost [--rounds 8]
[--store sqlite|postgresql] [--instances 1|2]``.

The load figures of :mod:`bench.api_load` (wrk against the daemon) depend on what else the
machine runs; these do much less. The application ``finality run`` serves (tokens on, a
SQLite store, one chain) is built in this process and driven through ASGI directly, one
request at a time, without a socket: what is measured is the route's own work (middleware,
auth, routing, store, view, JSON), the best of ``--rounds`` rounds (the least disturbed by
other processes). Figures:

- ``GET /v1/settlements/{id}`` (a watched settlement, the bench's case) and ``GET /healthz``,
  microseconds per request;
- ``POST /v1/settlements`` with one new chain registration (the body ``bench.receipts_cost``
  sends: chain and tx hash), microseconds per request: what one registration costs the
  daemon's API (auth, parsing, checks, the store's insert, the answer);
- ``POST /v1/settlements/batch`` with 1,000 new items, milliseconds per request (and the
  registrations per second one core would give).

``--store postgresql`` puts the store in a fresh schema of the machine's PostgreSQL
(127.0.0.1:5432, as the tests' ``pg_url``); ``--instances 2`` builds two applications on
that one store (two daemons sharing it) and sends the requests to them in turn: a request's
cost must not grow because another instance shares the store.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.conftest import fresh_pg_schema
from tests.support.daemon import toml_value
from watcher.api.server import create_app
from watcher.app.build import build
from watcher.config.loading import parse_config

TOKEN = "bench-" + secrets.token_hex(16)
Call = Callable[[str, str, bytes], Awaitable[tuple[int, bytes]]]


def config(tmp: Path, store_url: str | None = None) -> str:
    """A daemon config: SQLite in ``tmp`` (or ``store_url``), one chain nothing polls, two
    tokens."""
    return "\n".join(
        [
            "[store]",
            f"url = {toml_value(store_url or f'sqlite:///{tmp}/finality.db')}",
            "[signing]",
            f"dev_key_file = {toml_value(str(tmp / 'dev-key'))}",
            "[[chains]]",
            'name = "local"',
            "chain_id = 31337",
            'rpc = ["http://127.0.0.1:9"]',
            "[[api.tokens]]",
            'name = "bench"',
            f'token = "{TOKEN}"',
            'scopes = ["read", "register"]',
            "[[api.tokens]]",
            'name = "reader"',
            f'token = "reader-{secrets.token_hex(16)}"',
            'scopes = ["read"]',
        ]
    )


def asgi_caller(app: Any) -> Call:
    """A function sending one request to ``app`` and returning (status, body)."""

    async def call(method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        headers = [(b"host", b"127.0.0.1:8710"), (b"authorization", f"Bearer {TOKEN}".encode())]
        if body:
            headers += [(b"content-type", b"application/json")]
            headers += [(b"content-length", str(len(body)).encode())]
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8710),
        }
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        out: dict[str, Any] = {"status": 0, "body": b""}

        async def receive() -> dict[str, Any]:
            if messages:
                return messages.pop()
            await asyncio.Event().wait()  # the client never disconnects
            return {}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                out["status"] = message["status"]
            elif message["type"] == "http.response.body":
                out["body"] += message.get("body", b"")

        await app(scope, receive, send)
        return out["status"], out["body"]

    return call


def round_robin(calls: list[Call]) -> Call:
    """One caller sending each request to the next of ``calls`` in turn (a round-robin
    balancer in front of several instances)."""
    turn = [0]

    async def call(method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        turn[0] += 1
        return await calls[turn[0] % len(calls)](method, path, body)

    return call


@contextmanager
def store_url(kind: str) -> Iterator[str | None]:
    """The store's URL: None (a SQLite file of the config's own) or a fresh PostgreSQL
    schema, dropped at the end."""
    if kind == "sqlite":
        yield None
        return
    with fresh_pg_schema("fw_bench_") as url:
        yield url


def batch_body(count: int) -> bytes:
    """A batch of ``count`` new chain registrations."""
    items = [{"chain": "local", "tx_hash": "0x" + secrets.token_hex(32)} for _ in range(count)]
    return json.dumps({"items": items}).encode()


def single_body() -> bytes:
    """One new chain registration, as ``bench.receipts_cost`` registers a tx."""
    return json.dumps({"chain": "local", "tx_hash": "0x" + secrets.token_hex(32)}).encode()


async def best(
    rounds: int, per_round: int, request: Callable[[int], Awaitable[None]]
) -> tuple[float, float]:
    """The least seconds per request over ``rounds`` rounds of ``per_round`` requests: wall
    clock, and the process's CPU (the route runs in a worker thread of this process; CPU
    time is much less disturbed by the machine's other work)."""
    least, least_cpu = float("inf"), float("inf")
    for r in range(rounds):
        started, cpu = time.perf_counter(), time.process_time()
        for k in range(per_round):
            await request(r * per_round + k)
        least = min(least, (time.perf_counter() - started) / per_round)
        least_cpu = min(least_cpu, (time.process_time() - cpu) / per_round)
    return least, least_cpu


async def measure(call: Call, rounds: int) -> dict[str, tuple[float, float]]:
    """Seconds per request of each route (see the module doc)."""
    ids: list[str] = []
    for _ in range(2):
        status, body = await call("POST", "/v1/settlements/batch", batch_body(1000))
        assert status == 200, body[:300]
        ids += [r["settlement"]["settlement_id"] for r in json.loads(body)["results"]]

    async def get(k: int) -> None:
        status, body = await call("GET", f"/v1/settlements/{ids[k % len(ids)]}", b"")
        assert status == 200, body

    async def health(_k: int) -> None:
        await call("GET", "/healthz", b"")  # 503: nothing polls the chain; the same work

    bodies = [single_body() for _ in range(rounds * 200)]  # encoded before the clock starts

    async def register(k: int) -> None:
        status, body = await call("POST", "/v1/settlements", bodies[k])
        assert status == 201, body[:300]

    async def batch(_k: int) -> None:
        status, body = await call("POST", "/v1/settlements/batch", batch_body(1000))
        assert status == 200, body[:300]

    await best(1, 200, get)  # warm up
    return {
        "get": await best(rounds, 300, get),
        "healthz": await best(rounds, 300, health),
        "register": await best(rounds, 200, register),
        "batch": await best(max(3, rounds // 2), 1, batch),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--instances", type=int, choices=[1, 2], default=1)
    args = parser.parse_args()
    if args.instances > 1 and args.store == "sqlite":
        raise SystemExit("--instances 2 shares one store: use --store postgresql")
    tmp = Path(tempfile.mkdtemp(prefix="fw-api-cost-"))
    with store_url(args.store) as url:
        services = [build(parse_config(config(tmp, url), "<bench>")) for _ in range(args.instances)]
        try:
            call = round_robin([asgi_caller(create_app(service)) for service in services])
            figures = asyncio.run(measure(call, args.rounds))
        finally:
            for service in services:
                service.stop()
    print(f"store {args.store}, {args.instances} instance(s), load {os.getloadavg()[0]:.1f}")
    (get, get_cpu), (health, health_cpu) = figures["get"], figures["healthz"]
    print(
        f"GET /v1/settlements/{{id}}: {get * 1e6:,.0f} us a request ({get_cpu * 1e6:,.0f} us CPU)"
    )
    print(f"GET /healthz: {health * 1e6:,.0f} us a request ({health_cpu * 1e6:,.0f} us CPU)")
    register, register_cpu = figures["register"]
    print(
        f"POST /v1/settlements (1 new): {register * 1e6:,.0f} us a request "
        f"({register_cpu * 1e6:,.0f} us CPU)"
    )
    batch, batch_cpu = figures["batch"]
    print(
        f"POST /v1/settlements/batch (1,000 new): {batch * 1e3:,.0f} ms ({1000 / batch:,.0f}/s), "
        f"{batch_cpu * 1e3:,.0f} ms CPU ({1000 / batch_cpu:,.0f}/s a core)"
    )


if __name__ == "__main__":
    main()
