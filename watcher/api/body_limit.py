"""Request bodies capped before anything parses them, per route (a pure ASGI middleware).

FastAPI reads a whole body into memory and parses it before a route can look at its size:
a 100 MB body cost 100 MB (four of them 1.1 GB of RSS) before its 413. Here the size is
checked first: a ``Content-Length`` over the route's limit is answered 413 without reading
a byte of the body; a chunked body (no length) is counted while it arrives and cut off as
soon as it passes the limit. The server reads no further (uvicorn stops reading a socket
whose body nobody consumes), so memory stays at about one limit per request.

A body nested deeper than :data:`MAX_NESTING` is refused (422) before it is parsed too: the
JSON parser recurses once per level, and a library the daemon imports (py_ecc) raises
Python's recursion limit to 100,000, so half a megabyte of ``[`` overflowed the C stack and
killed the process. No valid body comes near the bound.

Limits (docs/api.md): :data:`REGISTRATION_BYTES` for ``POST /v1/settlements`` and the
webhooks, :data:`BATCH_BYTES` for ``POST /v1/settlements/batch``, :data:`DEFAULT_BYTES` for
every other route.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping
from itertools import accumulate

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from watcher.api.models.settlements import MAX_BATCH

MIB = 1024 * 1024

REGISTRATION_BYTES = 1 * MIB
"""Largest body of one registration (its ``dependent_state`` has its own, smaller limit)."""

BATCH_ITEM_BYTES = 16 * 1024
"""What a batch item may take on average: ``MAX_BATCH`` of them fit the batch's cap."""

BATCH_BYTES = MAX_BATCH * BATCH_ITEM_BYTES
"""Largest body of ``POST /v1/settlements/batch`` (16 MiB: 1,000 items of 16 KiB)."""

DEFAULT_BYTES = 64 * 1024
"""Largest body of any other route (replays, handoff and lease calls take tiny bodies)."""

ROUTE_BYTES: Mapping[str, int] = {
    "/v1/settlements": REGISTRATION_BYTES,
    "/v1/settlements/batch": BATCH_BYTES,
    "/v1/subscriptions": REGISTRATION_BYTES,
}
"""Limits by exact path."""

PREFIX_BYTES: Mapping[str, int] = {
    "/v1/webhooks/": REGISTRATION_BYTES,
    "/v1/subscriptions/": REGISTRATION_BYTES,
    "/v1/workflows/": REGISTRATION_BYTES,
}
"""Limits by path prefix (a payment processor's event can carry a whole object; a
subscription's addresses come 10,000 a request; a workflow step's ``side_effects`` have
their own, smaller limit, as ``dependent_state``)."""


MAX_NESTING = 128
"""Most nested arrays and objects a body may hold (``dependent_state`` is bounded at 32)."""

_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _STEP)


def nesting_depth(body: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest (brackets inside strings do not
    count), in C-speed passes: escaped backslashes and quotes dropped (every quote left then
    opens or closes a string), the strings cut out, everything but brackets deleted, a
    running sum. A body with few brackets is answered from their count alone."""
    opening = body.count(b"[") + body.count(b"{")
    if opening <= MAX_NESTING:
        return opening
    plain = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(plain.split(b'"')[::2])
    brackets = outside.translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


MAX_INT_DIGITS = sys.get_int_max_str_digits() or 4300
"""Longest integer literal Python's JSON parser reads (beyond it, a ValueError the framework
answered as a 400 naming nothing)."""

_LONG_DIGITS = re.compile(rb"[0-9]{%d}" % (MAX_INT_DIGITS + 1))


class _TooLong:
    """Where a too long integer literal stood in a parsed body."""


def oversized_integer(body: bytes) -> str | None:
    """The field (``a.b.0``, as a 422 names one) holding an integer literal longer than
    :data:`MAX_INT_DIGITS` digits, or None. Only a body holding such a run of digits is
    parsed here (a string of digits is not an integer: it is parsed and found fine)."""
    if _LONG_DIGITS.search(body) is None:
        return None

    def integer(text: str) -> object:
        return _TooLong() if len(text.lstrip("-")) > MAX_INT_DIGITS else 0

    try:
        parsed = json.loads(body, parse_int=integer)
    except ValueError:
        return None  # not JSON: the framework's parse names that
    path = _path_to_long(parsed, [])
    return None if path is None else ".".join(path) or "body"


def _path_to_long(value: object, path: list[str]) -> list[str] | None:
    """The path to the first :class:`_TooLong` in ``value`` (bounded by :data:`MAX_NESTING`)."""
    if isinstance(value, _TooLong):
        return path
    children: Iterable[tuple[object, object]] = ()
    if isinstance(value, dict):
        children = value.items()
    elif isinstance(value, list):
        children = enumerate(value)
    for key, child in children:
        found = _path_to_long(child, [*path, str(key)])
        if found is not None:
            return found
    return None


def limit_for(path: str) -> int:
    """The body limit of ``path`` in bytes."""
    if path in ROUTE_BYTES:
        return ROUTE_BYTES[path]
    for prefix, limit in PREFIX_BYTES.items():
        if path.startswith(prefix):
            return limit
    return DEFAULT_BYTES


class BodyLimit:
    """ASGI middleware: 413 in the API's error shape for a body over its route's limit."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared, chunked = _body_headers(scope)
        if not declared and not chunked:  # no body: nothing to cap (one pass over the headers)
            await self.app(scope, receive, send)
            return
        limit = limit_for(str(scope.get("path", "")))
        if declared is not None and declared > limit:
            await _too_large(scope, send, declared, limit)
            return
        body = await _read_capped(receive, limit)  # at most one limit in memory
        if body is None:
            await _too_large(scope, send, None, limit)
            return
        if nesting_depth(body) > MAX_NESTING:
            message = f"body: nested deeper than {MAX_NESTING} arrays and objects"
            await _answer(send, 422, {"error": message, "fields": ["body"]})
            return
        field = oversized_integer(body)
        if field is not None:
            message = (
                f"{field}: an integer of more than {MAX_INT_DIGITS} digits (no field takes "
                "one; the JSON parser refuses it)"
            )
            await _answer(send, 422, {"error": message, "fields": [field]})
            return
        await self.app(scope, replay_body(body, receive), send)


def _body_headers(scope: Scope) -> tuple[int | None, bool]:
    """The first declared ``Content-Length`` (None: absent; the server refuses a malformed
    one), and whether a body follows without a length (``Transfer-Encoding: chunked``)."""
    declared: int | None = None
    length_seen = chunked = False
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and not length_seen:
            length_seen = True
            try:
                declared = int(value)
            except ValueError:
                declared = None
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    return declared, chunked


async def _read_capped(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None as soon as it passes ``limit`` (the rest is never read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replay_body(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the body read already, then the real one (here, and
    for the step writes' hand-over to FastAPI's handler: watcher/api/json_write.py)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _too_large(scope: Scope, send: Send, size: int | None, limit: int) -> None:
    """Answer 413 naming the limit (the unread body stays unread)."""
    route = f"{scope.get('method', '')} {scope.get('path', '')}"
    what = "the body" if size is None else f"the body of {size} bytes"
    error = f"body: {what} is over the limit of {limit} bytes for {route}"
    await _answer(send, 413, {"error": error, "fields": ["body"], "limit": limit})


async def _answer(send: Send, status: int, answer: dict[str, object]) -> None:
    """Send ``answer`` (the error shape) and close the connection: the rest of the body
    is not read, so the connection cannot carry another request."""
    body = json.dumps(answer).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
