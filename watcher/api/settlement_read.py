"""``GET /v1/settlements/{id}``, the read callers poll: one path, from the request to the bytes.

Under load most of this read's time went to the framework, not to the read: FastAPI's
dependency solver and request wrapper (a ``Request``, two exit stacks, an exception
wrapper, a ``JSONResponse``), the matching of an included router's routes, a worker
thread's round trip for a synchronous route, SQLAlchemy's per-statement machinery. So the
route is declared as any other (the OpenAPI document, the ``Reader`` scope, the error
answers are the framework's), on the application's own router, matched first (an included
router's routes are matched and handled through FastAPI's per-inclusion contexts, which
rebuild the request wrapper), and its ASGI app is :class:`SettlementRead`'s: it checks the
token (:meth:`~watcher.api.auth.Require.check`, the dependency's own check), reads through
the store's one raw read
(:meth:`~watcher.store.settlements_store.SettlementQueries.settlement_at_head`: one indexed
statement, awaited on the event loop, on SQLite and PostgreSQL alike) and sends the
encoded view with the headers ``JSONResponse`` sends. An error is raised as from any route
and answered by the application's handlers (its exception middleware). Whatever the view
needs beyond the row and its head (a terminal verdict's signed receipt, dependent state's
binding receipt, a payment's transfers, a source's settlement, notes about the chain's
node) is read in a worker thread, as the framework would have run the route.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from guard.payment import ADDRESS_KINDS
from guard.settlement import TERMINAL_VERDICTS
from watcher.api.auth import Caller, Require
from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError
from watcher.api.payments import payment_view
from watcher.api.source_settlements import source_view
from watcher.api.views import chain_settlement_view, node_notes, waits_on_finalized
from watcher.settlements import settlement_view
from watcher.store import SettlementNotFound, SettlementRecord

Endpoint = Callable[[Caller, str], Coroutine[Any, Any, bytes]]
"""The route's endpoint: the caller and the path's id to the encoded view."""

_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
"""``JSONResponse``'s encoding (its ``render``), built once."""
_JSON = (b"content-type", b"application/json")
_AUTHORIZATION = b"authorization"


class SettlementRead(APIRoute):
    """The declared route whose ASGI app is :meth:`answer`: no dependency solver, no
    request wrapper (module doc). Added to the application's own router
    (:func:`watcher.api.settlements.install_read`), where the router calls the route's
    app."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        self.reader = Require("read")
        self.app = self.answer

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the caller (``Reader``'s 401/403), read, send the view (200)."""
        caller = self.reader.check(scope.get("app"), _authorization(scope))
        endpoint: Endpoint = self.endpoint
        body = await endpoint(caller, scope["path_params"]["settlement_id"])
        length = (b"content-length", str(len(body)).encode("latin-1"))
        await send({"type": "http.response.start", "status": 200, "headers": [length, _JSON]})
        await send({"type": "http.response.body", "body": body})


def _authorization(scope: Scope) -> str | None:
    """The first ``Authorization`` header, as ``Request.headers.get`` gives it."""
    for name, value in scope["headers"]:
        if name == _AUTHORIZATION:
            text: str = value.decode("latin-1")
            return text
    return None


async def settlement_answer(deps: ApiDeps, settlement_id: str, owner: str) -> bytes:
    """The view of ``owner``'s settlement ``settlement_id``, encoded as ``JSONResponse``
    encodes it (a 404 ``ApiError`` if none)."""
    try:
        rec, head = await deps.store.settlement_at_head(settlement_id, owner)
    except SettlementNotFound:
        raise ApiError(404, f"settlement_id: no settlement {settlement_id!r}") from None
    if plain(deps, rec):  # no receipt (not terminal), no binding (no state)
        return _ENCODE(settlement_view(rec, head, now=deps.clock())).encode("utf-8")
    return await run_in_threadpool(encoded_view, deps, rec, head)


def encoded_view(deps: ApiDeps, rec: SettlementRecord, head: int | None) -> bytes:
    """The view of ``rec`` at ``head``, encoded as ``JSONResponse`` encodes it; what it needs
    beyond the row and its head is read here (call it from a worker thread: the registration
    does, after its write)."""
    view = (
        settlement_view(rec, head, now=deps.clock()) if plain(deps, rec) else _view(deps, rec, head)
    )
    # Encoded as it is, not through the model: pydantic's encoder stops at 255 levels, and
    # a dependent_state stored before it was bounded must still read back.
    return _ENCODE(view).encode("utf-8")


def plain(deps: ApiDeps, rec: SettlementRecord) -> bool:
    """Whether the view is the row and its head alone (nothing more to read or sign, nothing
    to say about its node data: watcher/api/views.py ``node_notes``; a rule on the
    ``finalized`` tag reads the chain's recorded one too)."""
    source = deps.sources is not None and rec.chain in deps.sources.slots
    return not (
        source
        or rec.kind in ADDRESS_KINDS
        or rec.verdict in TERMINAL_VERDICTS
        or rec.dependent_state is not None
        or bool(node_notes(deps, rec))
        or waits_on_finalized(rec)
    )


def _view(deps: ApiDeps, rec: SettlementRecord, head: int | None) -> dict[str, Any]:
    view = payment_view(deps, rec) or source_view(deps, rec)
    return view or chain_settlement_view(deps, rec, lambda _: head)
