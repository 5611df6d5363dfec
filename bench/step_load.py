"""A light load generator for workflow step writes: raw HTTP/1.1 on keep-alive connections.

Why: the SDK client (``FinalityClient``: httpx, its response models, the checks it makes of
every answer) spends most of a millisecond of CPU a write, on the same two cores as the
daemon it drives, so a throughput figure taken with it measures the client as much as the
daemon. Here each connection is an asyncio stream that writes pre-built request bytes and
reads the answer by its ``Content-Length``: a few tens of microseconds a request, so the
figure is the daemon's.

The work is the SDK bench's (:func:`bench.workflows.drive`): per connection, workflows
created one after another, each step begun (with an idempotency key) then completed (with
side effects); every answer must be 200 (201 for a creation), or the run fails.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class LoadResult:
    """What one run of :func:`step_load` did."""

    writes: int
    """Step writes answered (begins and completes; creations are not counted)."""
    wall_s: float
    """Wall time of the whole run (the creations included)."""
    cpu_s: float
    """CPU time this process spent generating the load."""

    @property
    def per_second(self) -> float:
        """Step writes per second of wall time."""
        return self.writes / self.wall_s


def _request(host: str, path: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[int, bytes]:
    """Send ``request``; (status, body) of its answer."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
            break
    return status, await reader.readexactly(length)


async def _connection(url: str, workflows: int, steps: int) -> int:
    """Drive ``workflows`` workflows of ``steps`` steps on one connection; writes made."""
    parts = urlsplit(url)
    host = parts.netloc
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    names = [f"s{i}" for i in range(steps)]
    create = _request(
        host,
        "/v1/workflows",
        json.dumps({"steps": names, "holder": "bench", "lease_s": 600}).encode(),
    )
    bodies = [
        (
            json.dumps(
                {"fencing_token": 1, "operation": "work", "recovery": {"idempotency_key": n}}
            ).encode(),
            json.dumps({"fencing_token": 1, "side_effects": {"done": n}}).encode(),
        )
        for n in names
    ]
    writes = 0
    try:
        for _ in range(workflows):
            status, answer = await _exchange(reader, writer, create)
            if status != 201:
                raise RuntimeError(f"create: {status} {answer[:300]!r}")
            wid = json.loads(answer)["workflow_id"]
            for name, (begin, complete) in zip(names, bodies, strict=True):
                for verb, body in (("begin", begin), ("complete", complete)):
                    path = f"/v1/workflows/{wid}/steps/{name}/{verb}"
                    status, answer = await _exchange(reader, writer, _request(host, path, body))
                    if status != 200:
                        raise RuntimeError(f"{verb} {name}: {status} {answer[:300]!r}")
                    writes += 1
    finally:
        writer.close()
    return writes


def step_load(url: str, workflows: int, steps: int, connections: int) -> LoadResult:
    """Run ``workflows`` workflows (split over ``connections`` connections at once) against
    the daemon at ``url``."""
    per = max(1, workflows // connections)

    async def run() -> int:
        done = await asyncio.gather(*(_connection(url, per, steps) for _ in range(connections)))
        return sum(done)

    wall, cpu = time.perf_counter(), time.process_time()
    writes = asyncio.run(run())
    return LoadResult(writes, time.perf_counter() - wall, time.process_time() - cpu)
