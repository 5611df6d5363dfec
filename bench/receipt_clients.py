"""The clients of :mod:`bench.receipts_cost`: each asks for its tx's receipt from the tx's
depth-N block on.

Before, one pool of 8 threads fetched the receipts in block order once every tx had been
sent and registered: at W = 1,000 the first half's depth-N blocks went by while the bench
was still registering the second half one POST at a time, so a receipt's "latency" was
mostly the bench's own backlog (the first ask came 15.7 s after the depth-N block, median,
at load 6; the answering GET took 29 ms). Here a dispatcher thread hands each tx to the
pool the moment both are known: its depth-N block is out (seen by the bench's
:class:`~bench.receipts_cost.BlockClock`) and it is registered; a receipt not signed yet is
asked again after ``retry_s``, as before, so the clients never ask in a tight loop. The
printed ``first ask`` figure says whether the clients kept up (it should be the poll of the
dispatcher, a few ms).
"""

from __future__ import annotations

import asyncio
import heapq
import json
import threading
import time
import urllib.parse
from typing import Protocol


class Blocks(Protocol):
    """When each block was seen (:class:`bench.receipts_cost.BlockClock`)."""

    seen: dict[int, float]

    def head(self) -> int: ...


class ReceiptClients:
    """Fetch each tx's signed receipt from its depth-N block on (see the module doc): one
    asyncio loop in a thread of its own, a task per tx (a hundred threads asking at once
    cost the bench's interpreter more than the daemon's answers), each client its own
    connection, as W independent callers would have."""

    def __init__(self, base_url: str, blocks: Blocks, n: int, retry_s: float) -> None:
        self.base_url, self.blocks, self.n, self.retry_s = base_url, blocks, n, retry_s
        self.fetched: dict[str, float] = {}
        """Wall-clock time each receipt was in hand."""
        self.stages: dict[str, list[float]] = {"queued": [], "asks": [], "answer": []}
        """Per tx: seconds from the depth-N block (or registration) to the first ask, asks
        made, wall seconds of the answering GET."""
        self.errors: list[str] = []
        """Requests that failed on the way (connection refused or reset, a timeout)."""
        self._mined: dict[str, int] = {}
        self._ids: dict[str, tuple[str, float]] = {}
        self._due: list[tuple[int, int, str]] = []
        self._latencies: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._dispatch()), daemon=True)
        self._thread.start()

    def mined(self, tx_hash: str, block: int) -> None:
        """``tx_hash`` is in ``block``."""
        with self._lock:
            self._mined[tx_hash] = block
            self._ready(tx_hash)

    def registered(self, tx_hash: str, settlement_id: str, at: float) -> None:
        """``tx_hash`` is registered as ``settlement_id`` since ``at`` (monotonic)."""
        with self._lock:
            self._ids[tx_hash] = (settlement_id, at)
            self._ready(tx_hash)

    def _ready(self, tx_hash: str) -> None:
        if tx_hash in self._mined and tx_hash in self._ids:
            depth_n = self._mined[tx_hash] + self.n - 1
            heapq.heappush(self._due, (depth_n, len(self._due), tx_hash))

    async def _dispatch(self) -> None:
        tasks: list[asyncio.Task[None]] = []
        while not self._stop.is_set():
            head = self.blocks.head()
            with self._lock:
                while self._due and self._due[0][0] <= head:
                    depth_n, _, tx_hash = heapq.heappop(self._due)
                    sid, registered_at = self._ids[tx_hash]
                    since = max(self.blocks.seen[depth_n], registered_at)
                    tasks.append(asyncio.create_task(self._fetch(sid, since, tx_hash)))
            await asyncio.sleep(0.002)
        await asyncio.gather(*tasks)

    async def _fetch(self, settlement_id: str, since: float, tx_hash: str) -> None:
        self.stages["queued"].append(time.monotonic() - since)
        connection = Connection(self.base_url)
        asks = 0
        try:
            while True:
                started = time.monotonic()
                asks += 1
                try:
                    status, body = await connection.get(f"/v1/settlements/{settlement_id}/receipt")
                except (OSError, ValueError, asyncio.IncompleteReadError) as exc:
                    self.errors.append(f"{type(exc).__name__}: {exc}")  # printed; asked again
                    connection.close()
                    await asyncio.sleep(self.retry_s)
                    continue
                if status == 200 and json.loads(body).get("signature"):
                    self.fetched[tx_hash] = time.time()
                    self._latencies[tx_hash] = time.monotonic() - since
                    self.stages["answer"].append(time.monotonic() - started)
                    self.stages["asks"].append(float(asks))
                    return
                await asyncio.sleep(self.retry_s)
        finally:
            connection.close()

    def latencies(self, count: int, timeout: float = 300.0) -> list[float]:
        """Seconds from each tx's depth-N block (or registration) to its receipt in hand,
        once all ``count`` are answered."""
        deadline = time.monotonic() + timeout
        while len(self._latencies) < count:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise TimeoutError(f"{len(self._latencies)} of {count} receipts in hand")
            time.sleep(0.01)
        self._stop.set()
        self._thread.join()
        return list(self._latencies.values())


class Connection:
    """One client's keep-alive HTTP/1.1 connection to the API, for bodiless ``GET``s: a few
    lines of asyncio streams (httpx's async pool, shared by a thousand tasks, spent more of
    the bench's interpreter on its own bookkeeping than the daemon spent answering: a GET
    the daemon handled in under 4 ms took 10 s to come back)."""

    def __init__(self, base_url: str) -> None:
        url = urllib.parse.urlsplit(base_url)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def get(self, path: str) -> tuple[int, bytes]:
        """``GET path``: (status, body)."""
        if self._streams is None:
            self._streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._streams
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n\r\n".encode())
        await writer.drain()
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split()[1])
        headers = dict(line.lower().split(": ", 1) for line in head[1:] if ": " in line)
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection") == "close":
            self.close()
        return status, body

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None
