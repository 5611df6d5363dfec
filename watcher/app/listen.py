"""The API's listening socket, bound before the daemon says it is up.

uvicorn binds its port only once it runs, after the daemon has started its chains and
logged "API on ...": a port another process holds then ended the daemon with uvicorn's exit
code 3, after the announcement. Binding first turns that into a configuration error naming
the address (exit 78) before anything is announced, and nothing (the signer list
included) changes for a daemon that cannot serve.
"""

from __future__ import annotations

import errno
import socket


class ApiPortBusy(Exception):
    """``[api] listen`` cannot be bound (in use, or not an address of this host)."""


def bind_api(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, handed to uvicorn (which listens on it); raises
    :class:`ApiPortBusy` naming the address and why."""
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (OSError, UnicodeError) as exc:
        raise ApiPortBusy(f"[api] listen {shown}: cannot resolve the host ({exc})") from None
    sock = socket.socket(family, kind, proto)
    try:
        # As uvicorn does: a restart may bind while the last run's connections linger in
        # TIME_WAIT; a port another socket listens on is still refused.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            why = f"port {port} is already in use (another process listens on it)"
        else:
            why = f"cannot bind: {exc.strerror or exc}"
        raise ApiPortBusy(f"[api] listen {shown}: {why}") from None
    return sock
