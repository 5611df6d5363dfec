"""``/v1/settlements``: register a settlement, read it, its receipt and its events.

A body whose ``kind`` is a source kind is registered by :mod:`watcher.api.sources`
(through :func:`watcher.api.source_settlements.register_source_settlement`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Body
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError
from watcher.api.registration import SettlementRequest, check_dependent_state
from watcher.api.sender_facts import FieldProblem, sender_facts
from watcher.api.source_settlements import register_source_settlement, source_view
from watcher.api.views import (
    chain_or_error,
    chain_settlement_view,
    settlement_or_error,
    wait_signed,
)
from watcher.delivery.format import event_json
from watcher.settlements import Registration, new_settlement, register


def router(deps: ApiDeps) -> APIRouter:
    """The settlement routes over ``deps``."""
    api = APIRouter()

    @api.post("/v1/settlements", status_code=201)
    def create_settlement(payload: Annotated[dict[str, Any], Body()]) -> JSONResponse:
        """Register a settlement; 200 with the same settlement if it was already registered.

        ``kind`` is ``evm_tx`` by default (``chain``, ``tx_hash``...); a source kind
        (``stripe_payment_intent``, ``rq_job``, ``celery_task``) takes ``ref`` and
        ``source`` instead (docs/sources.md)."""
        if payload.get("kind", "evm_tx") != "evm_tx":
            view, status = register_source_settlement(deps, payload)
            return JSONResponse(view, status_code=status)
        try:
            body = SettlementRequest.model_validate(
                {k: v for k, v in payload.items() if k != "kind"}
            )
        except ValidationError as exc:
            raise RequestValidationError(exc.errors(include_url=False)) from None
        view, created = _register(deps, body)
        return JSONResponse(view, status_code=201 if created else 200)

    @api.get("/v1/settlements/{settlement_id}")
    def get_settlement(settlement_id: str) -> dict[str, Any]:
        """A registered settlement's current view."""
        rec = settlement_or_error(deps, settlement_id)
        view = source_view(deps, rec)
        return view if view is not None else chain_settlement_view(deps, rec)

    @api.get("/v1/settlements/{settlement_id}/receipt")
    def get_receipt(settlement_id: str) -> dict[str, Any]:
        """The latest signed receipt of the terminal verdict (a document `finality verify`
        checks offline); 404 while the settlement is not terminal or not yet signed."""
        rec = settlement_or_error(deps, settlement_id)
        receipt = wait_signed(deps, rec) if rec.verdict_enum.terminal else None
        if receipt is None:
            pending = rec.verdict_enum.terminal
            raise ApiError(
                404,
                f"settlement {settlement_id} has no receipt yet: verdict {rec.verdict}"
                + ("; its signed receipt is not built yet, retry shortly" if pending else ""),
                verdict=rec.verdict,
                pending=pending,
            )
        return receipt

    @api.get("/v1/settlements/{settlement_id}/events")
    def get_settlement_events(settlement_id: str) -> list[dict[str, Any]]:
        """Events (confirmed, failed, reorg, violations) recorded for one settlement."""
        settlement_or_error(deps, settlement_id)
        return [event_json(e) for e in deps.store.events(settlement_id=settlement_id)]

    return api


def _register(deps: ApiDeps, body: SettlementRequest) -> tuple[dict[str, Any], bool]:
    """Check a chain registration against its chain and store it; (view, created)."""
    chain = chain_or_error(deps, body.chain, 422)
    window = chain.resolved_header_window
    if body.confirmations is not None and body.confirmations >= window:
        raise ApiError(
            422,
            f"confirmations: must be below the header window of chain {chain.name!r} "
            f"({window}), got {body.confirmations}",
            fields=["confirmations"],
        )
    timeout_s = body.timeout_s
    if timeout_s is not None and timeout_s > chain.max_wait_s:
        # Capped by the policy's max wait (the deadline would be the same); capping here
        # also keeps a huge value from overflowing the stored milliseconds.
        timeout_s = chain.max_wait_s
    if body.dependent_state is not None:
        check_dependent_state(body.dependent_state, deps.config.delivery.max_dependent_state_bytes)
    try:
        known = sender_facts(body.tx_hash, body.sender, body.nonce, body.raw_tx)
    except FieldProblem as exc:
        raise ApiError(422, str(exc), fields=[exc.field]) from None
    registration = Registration(
        chain=chain,
        tx_hash=body.tx_hash,
        confirmations=body.confirmations,
        timeout_s=timeout_s,
        dependent_state=body.dependent_state,
        commit_url=body.commit_url,
        sender=known.sender,
        nonce=known.nonce,
        raw_tx=known.raw_tx,
    )
    if body.provisional:
        new = replace(new_settlement(registration, deps.clock()), provisional=True)
        rec, created = deps.store.register(new)
    else:
        rec, created = register(deps.store, registration, deps.clock())
    return chain_settlement_view(deps, rec), created
