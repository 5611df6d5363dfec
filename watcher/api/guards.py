"""Two checks on every request before any route runs, with tokens or without.

- ``Host`` must name this API: the listen address, a loopback name when listening on
  loopback (``localhost``, ``127.0.0.1``, ``[::1]``), any IP literal when listening on a
  wildcard address (``0.0.0.0``, ``::``), or a name in ``[api] allowed_hosts`` (``"*"``
  turns the check off, for a proxy that checks it). A page on ``evil.example`` whose DNS
  was rebound to 127.0.0.1 sends ``Host: evil.example`` and gets 421, so a browser cannot
  be made to read or drive a loopback API.
- A mutating request (POST, PUT, PATCH, DELETE) must say ``Content-Type:
  application/json``; anything else is 415. A cross-site HTML form (urlencoded, multipart,
  text/plain) or a body-less ``fetch`` cannot send that without a CORS preflight, which
  this API never grants: a stranger's page cannot replay a dead letter.

Both answer in the documented error shape. This is a pure ASGI middleware: it reads only
the request line and headers, never the body.
"""

from __future__ import annotations

import ipaddress
import json

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from watcher.api.errors import documented_methods
from watcher.config.api import ApiConfig, is_loopback

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
"""Methods whose body must be JSON."""

KNOWN_HOSTS = 64
"""``Host`` values whose answer a :class:`Guards` remembers (bounded: any client may send
any value)."""

_WILDCARDS = ("0.0.0.0", "::")
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def host_name(header: str) -> str:
    """The name in a ``Host`` header: port dropped, IPv6 brackets removed, lower case,
    a trailing dot dropped (``"[::1]:8710"`` → ``"::1"``)."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    name = value.rsplit(":", 1)[0] if value.count(":") == 1 else value
    return name.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostPolicy:
    """Which ``Host`` names this API answers to (see the module doc)."""

    def __init__(self, api: ApiConfig) -> None:
        listen = api.host.lower()
        self.any = "*" in api.allowed_hosts
        self.wildcard = listen in _WILDCARDS
        names = {listen, *(h.lower().rstrip(".") for h in api.allowed_hosts)}
        if self.wildcard or is_loopback(listen):
            names.update(_LOOPBACK_NAMES)
        self.names = frozenset(names)

    def allows(self, header: str) -> bool:
        """Whether a request with this ``Host`` header is for this API."""
        name = host_name(header)
        if self.any or name in self.names:
            return True
        return self.wildcard and _is_ip(name)


class Guards:
    """The ASGI middleware applying the ``Host`` and JSON-only checks (module doc)."""

    def __init__(self, app: ASGIApp, api: ApiConfig) -> None:
        self.app = app
        self.hosts = HostPolicy(api)
        self.known: dict[bytes, bool] = {}
        """Answers of :meth:`_allowed` by raw ``Host`` value."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = content_type = b""
        for name, value in scope.get("headers", ()):  # ASGI names are lower case; the last wins
            if name == b"host":
                host = value
            elif name == b"content-type":
                content_type = value
        problem = self._problem(scope, host, content_type)
        if problem is None:
            await self.app(scope, receive, send)
            return
        status, field, message = problem
        body = json.dumps({"error": f"{field}: {message}", "fields": [field]}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _allowed(self, raw_host: bytes) -> bool:
        """:meth:`HostPolicy.allows`, remembered for the first :data:`KNOWN_HOSTS` values
        seen (a client sends the same few on every request)."""
        allowed = self.known.get(raw_host)
        if allowed is None:
            allowed = self.hosts.allows(raw_host.decode("latin-1"))
            if len(self.known) < KNOWN_HOSTS:
                self.known[raw_host] = allowed
        return allowed

    @staticmethod
    def _served(scope: Scope) -> bool:
        """Whether the path takes the request's method: a method it does not take is the
        router's 405 (or 404), with its ``Allow``, not a 415 (schemathesis checks that status per method)."""
        app = scope.get("app")
        if not isinstance(app, FastAPI):
            return True
        return scope["method"] in documented_methods(app, str(scope.get("path", "")))

    def _problem(
        self, scope: Scope, raw_host: bytes, content_type: bytes
    ) -> tuple[int, str, str] | None:
        """``(status, field, message)`` for a request refused here, None to pass it on."""
        if not raw_host:
            return 400, "Host", "the header is required"
        if not self._allowed(raw_host):
            host = raw_host.decode("latin-1")
            shown = host if len(host) <= 80 else host[:77] + "..."
            return (
                421,
                "Host",
                f"{shown!r} is not a name this API answers to (the listen address, "
                "loopback names, or [api] allowed_hosts)",
            )
        if scope["method"] in MUTATING:
            raw = content_type.decode("latin-1")
            media = raw.split(";", 1)[0].strip().lower()
            # The served check reads the OpenAPI document (built on first use, ~0.5 s of a
            # fresh daemon's CPU): asked only of a body already refused, never on the way in.
            if media != "application/json" and self._served(scope):
                got = repr(raw[:80]) if raw else "none"
                return 415, "Content-Type", f"must be application/json (got {got})"
        return None
