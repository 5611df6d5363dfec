"""The read callers poll, ``GET /v1/settlements/{id}``, answered without the framework
(the API's load target: bench/README.md, "API under load").

Under load, three quarters of the event loop's time on this read went to FastAPI and
Starlette's machinery (the exception middlewares, the router's matching, the dependency
solver), a tenth to the read itself. This pure ASGI layer, installed just inside
:class:`~watcher.api.guards.Guards` (the ``Host`` check still applies), answers the common
success itself: a bodiless ``GET`` of exactly ``/v1/settlements/{id}`` (no query string), a
valid bearer token holding ``read`` (the application's :class:`~watcher.api.auth.Callers`),
and a settlement of that caller whose view is the row and its head alone
(:func:`~watcher.api.settlement_read.plain_answer`: SQLite, watched, no dependent state).

Everything else goes to the application untouched, which answers exactly as it always did:
no token or a bad one (401), a missing scope (403), an unknown id (404), a terminal verdict,
dependent state, a payment, a source's settlement, PostgreSQL, a store error, ``HEAD``, a
trailing slash, a query string, a body. So no error is answered here and no rule is written
twice; the bytes answered are the route's (its ``JSONResponse`` encoding and headers; a test
compares them). The route stays declared, so the OpenAPI document is unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from watcher.api.auth import Callers, Unauthenticated
from watcher.api.deps import ApiDeps
from watcher.api.settlement_read import plain_answer

PREFIX = "/v1/settlements/"
"""The read's path, before the id."""

_READ = "read"


@dataclass
class HotReads:
    """How many reads the layer answered itself (the rest went to the application)."""

    answered: int = 0
    """Requests answered here since the application was built."""


class HotRead:
    """The ASGI layer answering plain settlement reads (see the module doc)."""

    def __init__(self, app: ASGIApp, deps: ApiDeps, callers: Callers, reads: HotReads) -> None:
        self.app = app
        self.deps = deps
        self.callers = callers
        self.reads = reads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = self._answer(scope) if scope["type"] == "http" else None
        if body is None:
            await self.app(scope, receive, send)
            return
        self.reads.answered += 1
        headers = [
            (b"content-length", str(len(body)).encode("latin-1")),
            (b"content-type", b"application/json"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _answer(self, scope: Scope) -> bytes | None:
        """The encoded view, or None to leave the request to the application."""
        sid = _settlement_id(scope)
        if sid is None:
            return None
        authorization, bodiless = _headers(scope)
        if not bodiless:
            return None
        try:
            caller = self.callers.identify(authorization)
        except Unauthenticated:
            return None
        if _READ not in caller.scopes:
            return None
        view = plain_answer(self.deps, sid, caller.name)
        if view is None:
            return None
        try:  # as the route's JSONResponse renders it
            text = json.dumps(view, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError):
            return None  # the route fails the same way, and answers that failure itself
        return text.encode("utf-8")


def _settlement_id(scope: Scope) -> str | None:
    """The id of a ``GET /v1/settlements/{id}`` with nothing more (no query, no sub-path,
    no root path), else None."""
    if scope["method"] != "GET" or scope.get("query_string") or scope.get("root_path"):
        return None
    path = scope["path"]
    if not path.startswith(PREFIX):
        return None
    sid: str = path[len(PREFIX) :]
    return sid if sid and "/" not in sid else None


def _headers(scope: Scope) -> tuple[str | None, bool]:
    """The first ``Authorization`` header (as the route reads it), and whether the request
    has no body (no ``Transfer-Encoding``, no ``Content-Length`` but ``0``)."""
    authorization: str | None = None
    bodiless = True
    for name, value in scope["headers"]:
        if name == b"authorization":
            if authorization is None:
                authorization = value.decode("latin-1")
        elif name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
            bodiless = False
    return authorization, bodiless
