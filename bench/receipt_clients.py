"""The clients of :mod:`bench.receipts_cost`: each asks for its tx's signed receipt as a
client of the daemon does, from its registration on, with a waiting read.

A client registers its tx, then asks ``GET /v1/settlements/{id}/receipt?wait=S`` (what
``FinalityClient.receipt(id, wait_s=…)`` sends): the daemon answers the moment the receipt
is signed, or after S seconds with the 404 of a settlement without one, and the client asks
again. Before, each client asked from the tx's depth-N block (seen by the bench's own block
clock, which no real client has) and again 0.1 s after each 404 that came before the
verdict: at W = 1 up to 0.1 s of the latency was that retry, and at W = 1,000 the daemon
spent a third of its interpreter answering those 404s.

One asyncio loop in a thread of its own, a task per tx (a hundred threads asking at once
cost the bench's interpreter more than the daemon's answers), each client its own
keep-alive connection, as W independent callers would have.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
import time
import urllib.parse

WAIT_S = 30.0
"""Each ask's ``?wait=``: longer than any tx of the scenario takes to be final."""

RETRY_S = 0.1
"""After a request that failed on the way (connection refused or reset), ask again this
much later."""


class ReceiptClients:
    """Fetch each registered tx's signed receipt (see the module doc)."""

    def __init__(self, base_url: str, wait_s: float = WAIT_S) -> None:
        self.base_url, self.wait_s = base_url, wait_s
        self.fetched: dict[str, float] = {}
        """Wall-clock time each receipt was in hand."""
        self.in_hand: dict[str, float] = {}
        """Monotonic time each receipt was in hand."""
        self.asks: list[float] = []
        """Per tx: the requests it took."""
        self.errors: list[str] = []
        """Requests that failed on the way (connection refused or reset, a timeout)."""
        self._tasks: list[concurrent.futures.Future[None]] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def registered(self, tx_hash: str, settlement_id: str) -> None:
        """``tx_hash`` is registered as ``settlement_id``: its client starts asking."""
        fetch = self._fetch(settlement_id, tx_hash)
        self._tasks.append(asyncio.run_coroutine_threadsafe(fetch, self._loop))

    async def _fetch(self, settlement_id: str, tx_hash: str) -> None:
        connection = Connection(self.base_url)
        path = f"/v1/settlements/{settlement_id}/receipt?wait={self.wait_s:g}"
        asks = 0
        try:
            while True:
                asks += 1
                try:
                    status, body = await connection.get(path)
                except (OSError, ValueError, asyncio.IncompleteReadError) as exc:
                    self.errors.append(f"{type(exc).__name__}: {exc}")  # printed; asked again
                    connection.close()
                    await asyncio.sleep(RETRY_S)
                    continue
                if status == 200 and json.loads(body).get("signature"):
                    self.in_hand[tx_hash] = time.monotonic()
                    self.fetched[tx_hash] = time.time()
                    self.asks.append(float(asks))
                    return
                if status != 404 or "verdict" not in json.loads(body):
                    raise RuntimeError(f"{path}: HTTP {status}: {body[:200]!r}")
        finally:
            connection.close()

    def wait(self, count: int, timeout: float = 300.0) -> dict[str, float]:
        """Once all ``count`` receipts are in hand: when each was (monotonic), by tx hash."""
        deadline = time.monotonic() + timeout
        while len(self.in_hand) < count:
            failed = [t for t in self._tasks if t.done() and t.exception() is not None]
            if failed:
                raise RuntimeError(f"a receipt client failed: {failed[0].exception()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.in_hand)} of {count} receipts in hand")
            time.sleep(0.01)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        return dict(self.in_hand)


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
