"""``/v1/settlements``: register a settlement, read it, its receipt and its events.

A body whose ``kind`` is a source kind is registered by :mod:`watcher.api.sources`
(through :func:`watcher.api.source_settlements.register_source_settlement`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, FastAPI, Query
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from guard.payment import PAYMENT_KIND
from watcher.api.auth import Reader, Registrar
from watcher.api.deps import ApiDeps
from watcher.api.json_write import JsonWrite
from watcher.api.models.errors import ERRORS
from watcher.api.models.payments import PaymentRequest
from watcher.api.models.settlements import SettlementView, SourceSettlementRequest
from watcher.api.models.views import EventView
from watcher.api.payments import register_payment_settlement
from watcher.api.receipt_read import receipt_answer
from watcher.api.registration import SettlementRequest, checked_settlement, same_terms
from watcher.api.settlement_read import SettlementRead, encoded_view, settlement_answer
from watcher.api.source_settlements import register_source_settlement
from watcher.api.views import RECEIPT_WAIT_MAX_S, settlement_or_error, shown_event
from watcher.config.secrets import configured_secrets
from watcher.store.listing_store import listing

_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: ERRORS[404]}


def request_body(chains: list[str]) -> dict[str, Any]:
    """The body ``POST /v1/settlements`` takes: a chain registration on one of ``chains``,
    or a source one (the route parses it itself, by ``kind``, so the schema is given here)."""
    chain = SettlementRequest.model_json_schema()
    chain["properties"]["chain"]["enum"] = chains
    source = SourceSettlementRequest.model_json_schema()
    payment = PaymentRequest.model_json_schema()
    payment["properties"]["chain"]["enum"] = chains
    return {
        "required": True,
        "content": {"application/json": {"schema": {"anyOf": [chain, source, payment]}}},
    }


_CREATE: dict[str, Any] = {
    "status_code": 201,
    "response_model": None,
    "responses": {
        200: {"model": SettlementView, "description": "Already registered (same id)"},
        201: {"model": SettlementView, "description": "Registered"},
        409: ERRORS[409],
        413: ERRORS[413],
        422: ERRORS[422],
    },
}
"""How ``POST /v1/settlements`` is documented (409: a repeat of a registration with other
terms, naming the fields that differ; a payment's reference reused for another payment)."""


_READ: dict[str, Any] = {"response_model_exclude_unset": True, "responses": _NOT_FOUND}
"""The reads answer exactly the keys their views carry, 404 for an unknown id."""


def install_read(app: FastAPI, deps: ApiDeps) -> None:
    """Declare ``GET /v1/settlements/{id}`` on ``app``'s own router, before every topic's
    router (only ``/openapi.json`` comes first): the read callers poll is matched before
    them, and answered by its route's own ASGI app (watcher/api/settlement_read.py)."""

    async def get_settlement(caller: Reader, settlement_id: str) -> bytes:
        """A registered settlement's current view (the caller's own: 404 for another's)."""
        return await settlement_answer(deps, settlement_id, caller.name)

    app.router.add_api_route(
        "/v1/settlements/{settlement_id}",
        get_settlement,
        methods=["GET"],
        response_model=SettlementView,
        route_class_override=SettlementRead,
        **_READ,
    )


def install_create(app: FastAPI, deps: ApiDeps) -> None:
    """Declare ``POST /v1/settlements`` on ``app``'s own router, before every topic's router:
    matched before them, and answered by its route's own ASGI app (watcher/api/json_write.py;
    every refusal of the body or the token is FastAPI's own answer)."""

    async def create_settlement(
        caller: Registrar, payload: Annotated[dict[str, Any], Body()]
    ) -> Response:
        """Register a settlement; 200 with the same settlement if it was already registered.

        ``kind``: ``evm_tx`` by default (``chain``, ``tx_hash``...), ``evm_payment`` (``to``,
        ``asset``, ``amount``: docs/api.md) or a source kind with ``ref`` (docs/sources.md)."""
        if payload.get("kind", "evm_tx") != "evm_tx":  # a payment or a source's settlement
            view, status = await run_in_threadpool(_register_other, deps, payload, caller.name)
            return JSONResponse(view, status_code=status)
        try:
            body = SettlementRequest.model_validate(_without_kind(payload))
        except ValidationError as exc:
            raise RequestValidationError(exc.errors(include_url=False)) from None
        # The checks (a commit URL's host is resolved), the write and the answer's view in
        # one worker thread: a thread's round trip cost the loop as much as the view.
        answer, created = await run_in_threadpool(_register, deps, body, caller.name)
        return Response(answer, 201 if created else 200, media_type="application/json")

    body_doc = request_body([c.name for c in deps.config.chains])
    app.router.add_api_route(
        "/v1/settlements",
        create_settlement,
        methods=["POST"],
        route_class_override=JsonWrite,
        openapi_extra={"requestBody": body_doc},
        **_CREATE,
    )


def router(deps: ApiDeps) -> APIRouter:
    """The settlement routes over ``deps`` (the read: :func:`install_read`; the
    registration: :func:`install_create`)."""
    api = APIRouter()

    @api.get(
        "/v1/settlements/{settlement_id}/receipt",
        response_model=dict[str, Any],  # documented as before; answered as stored bytes
        responses=_NOT_FOUND,
    )
    async def get_receipt(
        caller: Reader,
        settlement_id: str,
        wait: Annotated[
            float | None, Query(ge=0, le=RECEIPT_WAIT_MAX_S, allow_inf_nan=False)
        ] = None,
    ) -> Response:
        """The latest signed receipt of the terminal verdict (a document `finality verify`
        checks offline); 404 while the settlement is not terminal or not yet signed.

        ``wait``: seconds (at most 60) to wait for the receipt when there is none yet,
        whatever the verdict: answered the moment it is signed, or, when the wait runs
        out, as without ``wait`` (the 404 with ``verdict`` and ``pending``)."""
        # The stored text as it is: no decoding, no validation, no encoding (a receipt is served as signed).
        receipt = await receipt_answer(deps, settlement_id, caller.name, wait)
        return Response(receipt, media_type="application/json")

    @api.get("/v1/settlements/{settlement_id}/events", response_model=list[EventView], **_READ)
    def get_settlement_events(caller: Reader, settlement_id: str) -> list[dict[str, Any]]:
        """Events (confirmed, failed, reorg, violations) recorded for one settlement."""
        rec = settlement_or_error(deps, settlement_id, caller.name)
        events = deps.store.events(rec.settlement_id, owner=caller.name)
        return [shown_event(e, configured_secrets(deps.config)) for e in events]

    return api


def _without_kind(payload: dict[str, Any]) -> dict[str, Any]:
    """A chain body without its (default) ``kind``."""
    return {k: v for k, v in payload.items() if k != "kind"}


def _register_other(deps: ApiDeps, payload: dict[str, Any], owner: str) -> tuple[Any, int]:
    """A body of another kind than ``evm_tx``: a payment to an address (api/payments.py) or
    a source's settlement (api/source_settlements.py); (view or error, status)."""
    if payload.get("kind") == PAYMENT_KIND:
        return register_payment_settlement(deps, payload, owner)
    return register_source_settlement(deps, payload, owner)


def _register(deps: ApiDeps, body: SettlementRequest, owner: str) -> tuple[bytes, bool]:
    """Check a chain registration against its chain and store it as ``owner``'s; (its view
    at its chain's head, encoded as GET answers it; created: False when ``owner`` had
    registered the tx already, with the same terms)."""
    new = checked_settlement(deps, body, owner)
    rec, head, created = listing(deps.store).register_one(new)
    if not created:
        same_terms(rec, new)
    return encoded_view(deps, rec, head), created
