"""``finality watch`` follows the daemon's event stream, not a GET polling loop: the CLI
talks to the daemon through a real counting HTTP proxy on loopback, and the requests it
made are checked."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from tests.e2e.helpers import Miner
from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, run_cli, wait_for

HOP_BY_HOP = {"connection", "transfer-encoding", "content-length", "keep-alive"}


class CountingProxy:
    """A forwarding HTTP proxy to ``upstream`` that records ``METHOD path`` of each request
    and streams answers through (so Server-Sent Events pass as they come)."""

    def __init__(self, upstream: str) -> None:
        self.requests: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def forward(self) -> None:
                proxy.requests.append(f"{self.command} {self.path.split('?')[0]}")
                size = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(size) if size else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                with (
                    httpx.Client(base_url=upstream, timeout=30.0) as client,
                    client.stream(self.command, self.path, headers=headers, content=body) as answer,
                ):
                    self.send_response(answer.status_code)
                    for key, value in answer.headers.items():
                        if key.lower() not in HOP_BY_HOP:
                            self.send_header(key, value)
                    self.send_header("Connection", "close")
                    self.end_headers()
                    try:
                        for chunk in answer.iter_raw():
                            self.wfile.write(chunk)
                            self.wfile.flush()
                    except (httpx.HTTPError, OSError):
                        pass  # the CLI hung up (it had its answer): end this stream
                self.close_connection = True

            do_GET = do_POST = forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(module_daemon: Daemon) -> Iterator[CountingProxy]:
    counting = CountingProxy(module_daemon.url)
    yield counting
    counting.close()


def test_watch_waits_on_the_event_stream_without_polling_the_settlement(
    module_anvil: Anvil, module_daemon: Daemon, proxy: CountingProxy
) -> None:
    tx = module_anvil.send()
    block = int(module_anvil.receipt(tx)["blockNumber"], 16)
    # Known to be in its block before the command starts: while a tx is in no block yet, a
    # waiting client reads it again at each new head (no event marks an inclusion), and how
    # many heads that takes is the daemon's poll timing, not what this test counts.
    sid = module_daemon.register(tx, confirmations=8)["settlement_id"]
    wait_for(lambda: module_daemon.settlement(sid)["block_number"] == block, 30, what="inclusion")
    with Miner(module_anvil, interval=0.4):  # depth 8 takes about 3 s
        done = run_cli("watch", tx, "--confirmations", "8", "--api", proxy.url)
    assert done.returncode == 0, done.stderr
    assert "FINALITY_CONFIRMED" in done.stdout
    assert "8/8 confirmations" in done.stderr
    reads = [
        r
        for r in proxy.requests
        if r.startswith("GET /v1/settlements/stl_") and not r.endswith("/events")
    ]
    assert len(reads) <= 2, f"watch polled the settlement: {proxy.requests}"
    assert "GET /v1/events" in proxy.requests, proxy.requests
