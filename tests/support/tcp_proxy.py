"""A plain TCP forwarder on loopback that a test can cut and restore.

The JSON-RPC fault proxy (tests/support/faulty_proxy.py) speaks HTTP; a WebSocket needs the
byte stream passed through untouched. :class:`TcpProxy` forwards every connection to an
upstream port; :meth:`TcpProxy.cut` closes the listener and every live connection (the
peer sees the connection drop, new dials are refused), :meth:`TcpProxy.restore` listens
again on the same port. Real sockets, no mocking.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.support.anvil import free_port


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``upstream_port``; see the module."""

    def __init__(self, upstream_port: int, port: int | None = None) -> None:
        self.upstream_port = upstream_port
        self.port = port or free_port()
        self.connections = 0
        """Connections accepted since creation."""
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._accepter: threading.Thread | None = None
        self.restore()

    def url(self, scheme: str = "ws") -> str:
        """``scheme://127.0.0.1:port``."""
        return f"{scheme}://127.0.0.1:{self.port}"

    @property
    def up(self) -> bool:
        """The proxy is listening."""
        return self._listener is not None

    def restore(self) -> None:
        """Listen (again) on :attr:`port`."""
        if self._listener is not None:
            return
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        self._accepter = threading.Thread(
            target=self._accept, args=(listener,), name="tcp-proxy", daemon=True
        )
        self._accepter.start()

    def cut(self) -> None:
        """Stop listening and drop every forwarded connection."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        if self._accepter is not None:
            self._accepter.join(5)
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    close = cut

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close()
                    upstream.close()
                    return
                self._sockets |= {client, upstream}
                self.connections += 1
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            with self._lock:
                self._sockets -= {src, dst}

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cut()
