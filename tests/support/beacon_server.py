"""A loopback Beacon API over anvil: the test beacon chain's light-client data, served.

``BeaconServer`` answers the three light-client endpoints of the standard Beacon API as a
beacon node would, from :class:`tests.support.beacon.BeaconSigner`:

- ``/bootstrap/{root}``: the bootstrap in period ``first_period`` (404 for another root);
- ``/updates?start_period&count``: one hand-over per period before the current one;
- ``/finality_update``: signed in ``period``, finalizing anvil's ``finalized`` block (asked of
  anvil at each request, so its execution payload header is anvil's real block).

Requests are counted by endpoint (:attr:`calls`), so a test can hold the daemon to one
bootstrap, one call per period and no call per receipt. ``signing_period`` makes it serve
finality updates signed by another period's committee (a wrong committee); ``fail`` makes
every request answer 503 (a beacon node down); :meth:`stop` and :meth:`start` take the server
off its port and back (a beacon node gone: connections refused).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.anvil import Anvil, free_port
from tests.support.beacon import SLOTS_PER_PERIOD, BeaconSigner, execution_of

PREFIX = "/eth/v1/beacon/light_client/"


class BeaconServer:
    """The test Beacon API (see the module doc); ``url`` is its base."""

    def __init__(self, anvil: Anvil, first_period: int = 3, period: int = 5) -> None:
        self.anvil = anvil
        self.signer = BeaconSigner()
        self.first_period = first_period
        self.period = period
        """The period finality updates are signed in (tests may move it on)."""
        self.signing_period: int | None = None
        self.fail = False
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()
        genesis = execution_of(anvil.block(0))
        self.bootstrap, self.checkpoint = self.signer.bootstrap(
            first_period * SLOTS_PER_PERIOD + 8, genesis
        )
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.start()

    def start(self) -> None:
        """Serve on :attr:`port` (again, after :meth:`stop`)."""
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving: the port refuses connections until :meth:`start`."""
        self._server.shutdown()
        self._server.server_close()

    def close(self) -> None:
        self.stop()

    def answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        """(HTTP status, JSON answer) of one request."""
        if not path.startswith(PREFIX):
            return 404, {"message": "not a light-client endpoint"}
        what = path[len(PREFIX) :]
        with self._lock:
            self.calls[what.split("/")[0]] += 1
            if self.fail:
                return 503, {"message": "beacon node unavailable"}
            genesis = execution_of(self.anvil.block(0))
            if what == f"bootstrap/{self.checkpoint}":
                return 200, self.bootstrap
            if what == "updates":
                start = int(query["start_period"][0])
                count = int(query["count"][0])
                periods = [p for p in range(start, start + count) if p < self.period]
                return 200, [self.signer.update(p, genesis) for p in periods]
            if what == "finality_update":
                finalized = execution_of(self.anvil.block("finalized"))
                update = self.signer.update(
                    self.period, finalized, with_committee=False, signing_period=self.signing_period
                )
                return 200, update
        return 404, {"message": f"no {what}"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                status, body = server.answer(parts.path, parse_qs(parts.query))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler
