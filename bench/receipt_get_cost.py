"""What answering a stored receipt costs the daemon, in process, run by hand:
``.venv/bin/python -m bench.receipt_get_cost [--rounds 8] [--headers 12]``.

At W = 1,000 the receipts of a block are in the store well before the clients have them
all: the time goes to ``GET /v1/settlements/{id}/receipt``, 100 of them a block, in the
interpreter that also polls the chain and builds the next block's receipts. This measures
the route's own work, as :mod:`bench.api_cost` does for the settlement view: the application
``finality run`` serves (SQLite, one chain nothing polls) driven through ASGI without a
socket, a stored finality receipt of ``--headers`` headers (the golden vector's, its header
list repeated: 12 headers are the 22 KB of the bench's N = 12; the signature is not checked
here), CPU seconds per request (``time.process_time``), the best of ``--rounds`` rounds.

Beside it, same run: ``GET /v1/settlements/{id}`` of that settlement (its view carries the
receipt too) and of one not final yet (no receipt: the floor of a read route, auth, routing,
one store read).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bench.api_cost import Call, asgi_caller, batch_body, config
from watcher.api.server import create_app
from watcher.app.build import build
from watcher.app.daemon import App
from watcher.config.loading import parse_config
from watcher.store.receipts_store import receipt_store

VECTOR = Path(__file__).resolve().parent.parent / "tests/vectors/receipts/finality_depth.json"


def stored_receipt(service: App, settlement_id: str, headers: int) -> int:
    """Store a finality receipt of ``headers`` headers for ``settlement_id`` (made terminal
    here); returns the size of its JSON."""
    receipt: dict[str, Any] = json.loads(VECTOR.read_text())["receipt"]
    chain = receipt["proof"]["headers"]
    receipt["proof"]["headers"] = [chain[i % len(chain)] for i in range(headers)]
    receipt["settlement_id"] = settlement_id
    with service.store.writer.begin() as conn:
        conn.execute(
            text("UPDATE settlements SET verdict = 'FINALITY_CONFIRMED' WHERE settlement_id = :s"),
            {"s": settlement_id},
        )
    receipt_store(service.store).add(receipt, int(time.time() * 1000))
    return len(json.dumps(receipt, separators=(",", ":")))


async def best_cpu(rounds: int, per_round: int, request: Callable[[], Awaitable[None]]) -> float:
    """The least CPU seconds per request over ``rounds`` rounds of ``per_round`` requests."""
    least = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(per_round):
            await request()
        least = min(least, (time.process_time() - started) / per_round)
    return least


async def measure(service: App, call: Call, rounds: int, headers: int) -> dict[str, float]:
    """CPU seconds per request of the two routes, and the receipt's size."""
    status, body = await call("POST", "/v1/settlements/batch", batch_body(2))
    assert status == 200, body[:300]
    sid, pending = (r["settlement"]["settlement_id"] for r in json.loads(body)["results"])
    size = stored_receipt(service, sid, headers)

    async def receipt() -> None:
        status, body = await call("GET", f"/v1/settlements/{sid}/receipt", b"")
        assert status == 200 and json.loads(body)["settlement_id"] == sid, body[:300]

    async def view() -> None:
        status, body = await call("GET", f"/v1/settlements/{sid}", b"")
        assert status == 200 and json.loads(body)["receipt"], body[:300]

    async def floor() -> None:
        status, body = await call("GET", f"/v1/settlements/{pending}", b"")
        assert status == 200, body[:300]

    await best_cpu(1, 100, receipt)  # warm up
    return {
        "receipt": await best_cpu(rounds, 300, receipt),
        "view": await best_cpu(rounds, 300, view),
        "floor": await best_cpu(rounds, 300, floor),
        "size": float(size),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--headers", type=int, default=12)
    args = parser.parse_args()
    service = build(parse_config(config(Path(tempfile.mkdtemp(prefix="fw-get-cost-"))), "<b>"))
    try:
        app = create_app(service)
        figures = asyncio.run(measure(service, asgi_caller(app), args.rounds, args.headers))
    finally:
        service.stop()
    receipt, view, floor = figures["receipt"], figures["view"], figures["floor"]
    print(
        f"GET /v1/settlements/{{id}}/receipt ({figures['size'] / 1024:.1f} KiB, "
        f"{args.headers} headers): {receipt * 1e6:,.0f} us CPU a request "
        f"({1 / receipt:,.0f}/s a core)"
    )
    print(f"GET /v1/settlements/{{id}} of it (the view carries it): {view * 1e6:,.0f} us CPU")
    print(
        f"GET /v1/settlements/{{id}} not final (no receipt, same run): {floor * 1e6:,.0f} us "
        f"CPU (the receipt GET costs {receipt / floor:.2f}x this floor)"
    )


if __name__ == "__main__":
    main()
