"""Receivers that misbehave on the wire, on real loopback sockets: one that answers 200
and then streams a body that never ends, one that trickles its answer a byte at a time.

Each reads the request (headers and ``Content-Length`` bytes of body), counts it, and then
answers in its own way on a thread per connection until the client hangs up or the
receiver stops. They are plain sockets, not an HTTP framework: a framework would buffer
or pace the answer itself.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType

TRICKLE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 64\r\n\r\n" + b"x" * 64
"""What a trickling receiver sends, one byte at a time: a 2xx once it is all there."""


class HostileReceiver:
    """A loopback receiver answering every POST with ``mode``: ``"endless"`` (200 and a
    body streamed as fast as the client reads, up to ``most_bytes``) or ``"trickle"`` (the answer one
    byte every ``gap_s``)."""

    def __init__(self, mode: str, gap_s: float = 2.0, most_bytes: int = 256 << 20) -> None:
        if mode not in ("endless", "trickle"):
            raise ValueError(mode)
        self.mode = mode
        self.gap_s = gap_s
        self.most_bytes = most_bytes
        """An endless body ends (the connection closes) after this many bytes: a client
        that reads it all has shown it, without taking the machine's memory."""
        self.requests = 0
        """Requests read so far (each one an attempt of the daemon)."""
        self.sent = 0
        """Body bytes written so far (endless mode)."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self._stop.set()
        self._sock.close()

    def __enter__(self) -> HostileReceiver:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                while not self._stop.is_set() and self._read_request(conn):
                    with self._lock:
                        self.requests += 1
                    self._answer(conn)
            except OSError:
                return  # the client hung up: what a deadline or a cap does

    def _read_request(self, conn: socket.socket) -> bool:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return False
            body += chunk
        return True

    def _answer(self, conn: socket.socket) -> None:
        if self.mode == "trickle":
            for i in range(len(TRICKLE)):
                if self._stop.wait(self.gap_s):
                    return
                conn.sendall(TRICKLE[i : i + 1])
            return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n")
        block = b"\0" * 65536
        for _ in range(self.most_bytes // len(block)):
            if self._stop.is_set():
                return
            conn.sendall(block)
            with self._lock:
                self.sent += len(block)
        conn.shutdown(socket.SHUT_RDWR)  # the body ends with the connection
