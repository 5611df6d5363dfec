"""A real HTTP receiver on loopback, as a caller of the watcher would run one.

It does what ``docs/delivery.md`` tells a receiver to do, with the recipe written there:

1. verify ``X-Finality-Signature`` (HMAC-SHA256 over ``timestamp + "." + body``) when it has
   a secret; a bad or missing signature gets 401 and changes nothing;
2. apply the effect at most once per ``Idempotency-Key`` (a retry of something already
   applied is answered 200 and not applied again);
3. answer 2xx only once the effect is recorded.

Tests count :attr:`Receiver.applied` (effects), not requests. The receiver can be told to
fail (``fail_with = 503``), to hold the next request until released (to kill the daemon
while a delivery is in flight), and to stop and start again on the same port (down).

Run as ``python -m tests.support.receiver --port P`` it serves until killed, for the
benchmark; ``GET /stats`` then answers the counts as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import json
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.anvil import free_port

SIGNATURE_TOLERANCE_S = 300
"""Largest accepted distance between the signed timestamp and the receiver's clock."""


def verify_signature(
    secret: str, headers: dict[str, str], body: bytes, now: float | None = None
) -> bool:
    """The documented recipe: recompute ``v1=HMAC-SHA256(secret, ts + "." + body)``, compare
    in constant time, and refuse a timestamp far from now (replays of old requests)."""
    timestamp = headers.get("x-finality-timestamp", "")
    sent = headers.get("x-finality-signature", "")
    if not timestamp.isdigit() or not sent:
        return False
    if abs((time.time() if now is None else now) - int(timestamp)) > SIGNATURE_TOLERANCE_S:
        return False
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    expected = "v1=" + mac.hexdigest()
    return any(hmac.compare_digest(expected, part.strip()) for part in sent.split(","))


@dataclass
class Received:
    """One request as it arrived."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    status: int = 0
    json: Any = None

    @property
    def key(self) -> str:
        return self.headers.get("idempotency-key", "")


@dataclass
class Effect:
    """One applied effect (the first request with its idempotency key)."""

    path: str
    key: str
    body: dict[str, Any]
    at: float = field(default_factory=time.time)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], receiver: Receiver) -> None:
        self.receiver = receiver
        self.open_sockets: set[socket.socket] = set()
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        self.open_sockets.add(sock)
        return sock, addr

    def shutdown_request(self, request: Any) -> None:
        self.open_sockets.discard(request)
        super().shutdown_request(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed ACK
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client is gone (killed mid-request): the effect, if any, stands

    def do_GET(self) -> None:
        self._answer(200, self.server.receiver.stats())

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, payload = self.server.receiver.handle(self.path, headers, body)
        self._answer(status, payload)


class Receiver:
    """An HTTP server on 127.0.0.1 (see the module doc). Use as a context manager."""

    def __init__(
        self,
        secret: str | None = None,
        port: int | None = None,
        start: bool = True,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.secret = secret
        self.tls = tls
        """Serve https with this server context (a test CA's certificate), else http."""
        self.port = port or free_port()
        self.requests: list[Received] = []
        self.applied: dict[str, Effect] = {}
        self.fail_with: int | None = None
        """Answer this status (without applying) to every request while set."""
        self.held = threading.Event()
        """Set when a held request has arrived."""
        self._hold: threading.Event | None = None
        self._hold_path: str | None = None
        self._release: threading.Event | None = None
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        if start:
            self.start()

    def url(self, path: str = "/") -> str:
        """Absolute URL of ``path`` on this receiver."""
        scheme = "http" if self.tls is None else "https"
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Listen (again) on the same port."""
        if self._server is not None:
            return
        deadline = time.monotonic() + 10
        while True:
            try:
                self._server = _Server(("127.0.0.1", self.port), self)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        if self.tls is not None:
            sock = self._server.socket
            self._server.socket = self.tls.wrap_socket(sock, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop listening and cut open connections: the receiver is down."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        for sock in list(server.open_sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self.stop()

    # -- behaviour -----------------------------------------------------------------------

    def hold_next(self, path: str | None = None) -> None:
        """Hold the next request (to ``path``, if given) after reading it, until
        :meth:`release`."""
        self.held.clear()
        self._hold_path = path
        self._hold = self._release = threading.Event()

    def release(self) -> None:
        """Let a held request go on (it is then applied, if not a duplicate)."""
        if self._release is not None:
            self._release.set()

    def handle(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
        """What the server does with one request: verify, dedupe, apply."""
        received = Received(path, headers, body, time.time())
        try:
            received.json = json.loads(body)
        except ValueError:
            received.json = None
        with self._lock:
            self.requests.append(received)
            hold = None
            if self._hold is not None and self._hold_path in (None, path):
                hold, self._hold = self._hold, None
        if hold is not None:
            self.held.set()
            hold.wait(timeout=60)
        if self.secret is not None and not verify_signature(self.secret, headers, body):
            received.status = 401
            return 401, {"error": "bad signature"}
        if self.fail_with is not None:
            received.status = self.fail_with
            return self.fail_with, {"error": "told to fail"}
        key = received.key
        with self._lock:
            duplicate = key in self.applied
            if not duplicate and isinstance(received.json, dict):
                self.applied[key] = Effect(path, key, received.json)
        received.status = 200
        return 200, {"applied": not duplicate, "duplicate": duplicate}

    # -- configuring a daemon to talk to it -------------------------------------------------

    def daemon_config(
        self,
        secret: str | None,
        alerts: Sequence[tuple[str, str, dict[str, Any]]] = (("webhook", "/alerts", {}),),
        **delivery: Any,
    ) -> str:
        """TOML ``[delivery]`` and ``[[alerts]]`` tables sending alerts to this receiver
        (append to a daemon's config file). ``alerts``: (type, path, extra keys)."""
        from tests.support.daemon import toml_value

        lines = ["", "[delivery]"]
        if secret is not None:
            lines.append(f"secret = {toml_value(secret)}")
        lines += [f"{key} = {toml_value(value)}" for key, value in delivery.items()]
        for type_, path, extra in alerts:
            lines += ["", "[[alerts]]", f"type = {toml_value(type_)}"]
            if type_ != "log":
                lines.append(f"url = {toml_value(self.url(path))}")
            lines += [f"{key} = {toml_value(value)}" for key, value in extra.items()]
        return "\n".join(lines) + "\n"

    # -- looking at what happened ----------------------------------------------------------

    def effects(self, path: str | None = None, type_: str | None = None) -> list[dict[str, Any]]:
        """Applied bodies (in order applied), optionally of one path and ``type``."""
        with self._lock:
            found = list(self.applied.values())
        return [
            e.body
            for e in sorted(found, key=lambda e: e.at)
            if (path is None or e.path == path) and (type_ is None or e.body.get("type") == type_)
        ]

    def alerts(self, kind: str | None = None, path: str = "/alerts") -> list[dict[str, Any]]:
        """Applied alert bodies, optionally of one event kind."""
        return [b for b in self.effects(path) if kind is None or b.get("kind") == kind]

    def received(self, path: str | None = None) -> list[Received]:
        """Requests (all, including duplicates and refused ones)."""
        with self._lock:
            return [r for r in self.requests if path is None or r.path == path]

    def stats(self) -> dict[str, Any]:
        """Counts, as ``GET /stats`` answers them."""
        with self._lock:
            return {"requests": len(self.requests), "applied": len(self.applied)}


class CountingReceiver(Receiver):
    """The benchmark's receiver: verifies and dedupes, but keeps only counts (no memory
    growth of its own with a long run)."""

    def __init__(self, secret: str | None = None, port: int | None = None) -> None:
        self.seen: set[str] = set()
        self.count = 0
        super().__init__(secret, port)

    def handle(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
        if self.secret is not None and not verify_signature(self.secret, headers, body):
            return 401, {"error": "bad signature"}
        key = headers.get("idempotency-key", "")
        with self._lock:
            self.count += 1
            duplicate = key in self.seen
            self.seen.add(key)
        return 200, {"applied": not duplicate}

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"requests": self.count, "applied": len(self.seen)}


def main() -> None:
    parser = argparse.ArgumentParser(description="serve a counting receiver until killed")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--secret")
    args = parser.parse_args()
    receiver = CountingReceiver(args.secret, args.port)
    print("ready", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        receiver.stop()


if __name__ == "__main__":
    main()
