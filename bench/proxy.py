"""A counting JSON-RPC proxy on loopback, in front of a real node.

It forwards every HTTP POST unchanged and counts JSON-RPC calls by method (a batch of k
calls counts k) and HTTP requests, and logs each call's method and params. Benchmarks read the counters; nothing is faked.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests


class CountingProxy:
    """``CountingProxy(upstream).url`` is a JSON-RPC endpoint that counts what passes."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.calls: Counter[str] = Counter()
        self.log: list[tuple[str, list[object]]] = []
        """Every JSON-RPC call received, (method, params), in order of arrival."""
        self.http_requests = 0
        self._lock = threading.Lock()
        self._session = requests.Session()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                proxy._count(body)
                answer = proxy._session.post(
                    proxy.upstream,
                    data=body,
                    headers={"content-type": "application/json"},
                    timeout=60,
                )
                self.send_response(answer.status_code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def _count(self, body: bytes) -> None:
        try:
            payload = json.loads(body)
        except ValueError:
            return
        items = payload if isinstance(payload, list) else [payload]
        with self._lock:
            self.http_requests += 1
            for item in items:
                if isinstance(item, dict):
                    self.calls[str(item.get("method"))] += 1
                    params = item.get("params")
                    self.log.append(
                        (str(item.get("method")), list(params) if isinstance(params, list) else [])
                    )

    def total(self) -> int:
        """JSON-RPC calls so far."""
        with self._lock:
            return sum(self.calls.values())

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()
