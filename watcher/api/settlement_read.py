"""``GET /v1/settlements/{id}``, the read callers poll: one path, from the request to the bytes.

Under load most of this read's time went to the framework, not to the read: FastAPI's
dependency solver, a worker thread's round trip for a synchronous route, SQLAlchemy's
per-statement machinery. So the route is declared as any other (the OpenAPI document, the
``Reader`` scope, the error answers are the framework's), but its handler
(:class:`SettlementRead`) resolves the caller and the id itself instead of through the
dependency solver, and reads through the store's one raw read
(:meth:`~watcher.store.settlements_store.SettlementQueries.settlement_at_head`: one indexed
statement, awaited on the event loop, on SQLite and PostgreSQL alike). Whatever the view
needs beyond the row and its head (a terminal verdict's signed receipt, dependent state's
binding receipt, a payment's transfers, a source's settlement, notes about the chain's
node) is read in a worker thread, as the framework would have run the route.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

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

Endpoint = Callable[[Caller, str], Coroutine[Any, Any, Response]]


class SettlementRead(APIRoute):
    """The route's handler without the dependency solver: the caller (``Reader``'s check,
    :class:`~watcher.api.auth.Require`) and the path's id, then the endpoint. Errors are
    raised as from any route, and answered by the application's handlers."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint: Endpoint = self.endpoint
        reader = Require("read")

        async def handler(request: Request) -> Response:
            caller = await reader(request)
            return await endpoint(caller, request.path_params["settlement_id"])

        return handler


async def settlement_answer(deps: ApiDeps, settlement_id: str, owner: str) -> JSONResponse:
    """The view of ``owner``'s settlement ``settlement_id`` (a 404 ``ApiError`` if none)."""
    try:
        rec, head = await deps.store.settlement_at_head(settlement_id, owner)
    except SettlementNotFound:
        raise ApiError(404, f"settlement_id: no settlement {settlement_id!r}") from None
    if plain(deps, rec):  # no receipt (not terminal), no binding (no state)
        view = settlement_view(rec, head, now=deps.clock())
    else:
        view = await run_in_threadpool(_view, deps, rec, head)
    # Encoded as it is, not through the model: pydantic's encoder stops at 255 levels, and
    # a dependent_state stored before it was bounded must still read back.
    return JSONResponse(view)


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
