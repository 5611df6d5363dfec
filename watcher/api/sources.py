"""Stripe's signed webhooks: ``POST /v1/webhooks/stripe`` (the only Stripe source with a
``webhook_secret``) and ``POST /v1/webhooks/stripe/{source}``.

A bad, missing or stale ``Stripe-Signature`` is answered 400 and nothing is stored; an event
about a PaymentIntent nobody registered is acknowledged (200, ``matched: false``) so that
Stripe does not retry it for days; a store failure is 503, so that Stripe does retry.

Several instances on one PostgreSQL (docs/handoff.md): whichever instance Stripe reaches
first stores the verified event in the webhook inbox (:mod:`watcher.sources.inbox`) before
answering; the verdict is changed only by the source's lease owner, under its fencing token:
the receiving instance applies the inbox at once when it is the owner (200 with the
verdict), otherwise it answers 202 (``queued: true``) and the owner applies it after its
next lease check (the daemon registers that job, not this router).

The Stripe adapter is imported only when a webhook arrives for a configured Stripe source,
so a daemon without the ``stripe`` extra serves every other route.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from guard.source import InvalidRef
from watcher.api.deps import ApiDeps
from watcher.api.models.errors import ERRORS
from watcher.sources.inbox import WebhookInbox
from watcher.sources.poller import SourceSlot
from watcher.sources.stripe_settings import KIND as STRIPE_KIND
from watcher.sources.stripe_settings import StripeSettings
from watcher.store import SettlementNotFound, SettlementRecord, StaleFencingToken, StoreError

MAX_WEBHOOK_BYTES = 1 << 20
"""Largest webhook body read (Stripe's events are far smaller)."""


_ERRORS: dict[int | str, dict[str, Any]] = {
    202: {"description": "Received; applied once this instance owns the source"},
    **{s: ERRORS[s] for s in (400, 404, 413, 503)},
}
"""A webhook is refused when no source takes it (404), unsigned or stale (400), too large."""
_EVENT_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"type": "object"}}},
        "description": "Stripe's event, exactly as signed (JSON only: anything else is 415).",
    }
}


def router(deps: ApiDeps) -> APIRouter:
    """The Stripe webhook routes over ``deps``."""
    api = APIRouter()

    @api.post("/v1/webhooks/stripe", responses=_ERRORS, openapi_extra=_EVENT_BODY)
    async def stripe_webhook(request: Request) -> JSONResponse:
        """Stripe's signed event for the one Stripe source that has a ``webhook_secret``."""
        return await _stripe_event(deps, request, None)

    @api.post("/v1/webhooks/stripe/{source}", responses=_ERRORS, openapi_extra=_EVENT_BODY)
    async def stripe_webhook_for(source: str, request: Request) -> JSONResponse:
        """Stripe's signed event for the Stripe source named ``source``."""
        return await _stripe_event(deps, request, source)

    return api


def _hooked(deps: ApiDeps, name: str | None) -> SourceSlot | JSONResponse:
    """The Stripe source a webhook is for, or the 404 that says why there is none."""
    slots = deps.sources.slots if deps.sources is not None else {}
    hooked = [s for s in slots.values() if s.config.kind == STRIPE_KIND and s.config.webhook_secret]
    if name is not None:
        hooked = [s for s in hooked if s.config.name == name]
    if deps.sources is not None and deps.inbox is not None and len(hooked) == 1:
        return hooked[0]
    reason = (
        f"source: no Stripe source named {name!r} with a webhook_secret"
        if name is not None
        else "no single Stripe source with a webhook_secret: "
        + (
            "use /v1/webhooks/stripe/{source}"
            if hooked
            else "configure webhook_secret in its [[sources]] table"
        )
    )
    return JSONResponse({"error": reason}, status_code=404)


async def _stripe_event(deps: ApiDeps, request: Request, name: str | None) -> JSONResponse:
    from watcher.sources.stripe_webhooks import WebhookRejected, payment_intent_of, verify_webhook

    slot = _hooked(deps, name)
    if isinstance(slot, JSONResponse):
        return slot
    assert deps.inbox is not None  # _hooked checked it
    settings = StripeSettings.narrow(slot.config)
    secret = settings.webhook_secret
    assert secret is not None
    payload = await request.body()
    if len(payload) > MAX_WEBHOOK_BYTES:
        return JSONResponse({"error": "body: larger than 1 MiB"}, status_code=413)
    try:
        event = verify_webhook(
            payload, request.headers.get("stripe-signature"), secret, settings.webhook_tolerance_s
        )
    except WebhookRejected as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    answer: dict[str, Any] = {"received": True, "event": event["id"], "matched": False}
    ref = payment_intent_of(event)
    if ref is None:
        return JSONResponse({**answer, "reason": "the event is not about a PaymentIntent"})
    try:
        ref = slot.source.check_ref(ref)
    except InvalidRef:
        return JSONResponse({**answer, "reason": "the event names no valid PaymentIntent"})
    try:
        rec, applied = await run_in_threadpool(_receive, deps, deps.inbox, slot, ref, event)
    except StoreError as exc:
        return JSONResponse({"error": f"store unavailable, retry: {exc}"}, status_code=503)
    if rec is None:
        return JSONResponse({**answer, "reason": "no settlement registered for " + ref})
    answer.update(matched=True, settlement_id=rec.settlement_id)
    if not applied:
        # Stored durably; the source's lease owner (another instance) applies it.
        return JSONResponse({**answer, "queued": True, "verdict": rec.verdict}, status_code=202)
    return JSONResponse({**answer, "verdict": rec.verdict})


def _receive(
    deps: ApiDeps, inbox: WebhookInbox, slot: SourceSlot, ref: str, event: dict[str, Any]
) -> tuple[SettlementRecord | None, bool]:
    """Store the event in the inbox (any instance), then apply the inbox if this instance
    owns the source. Returns (the settlement as stored now, whether it was applied here)."""
    name = slot.config.name
    try:
        rec = deps.store.settlement_by_tx(name, ref)
    except SettlementNotFound:
        return None, False  # nobody registered it: acknowledged, nothing kept (as ever)
    inbox.add(name, ref, event)
    if not deps.handoff.owns(name):
        return rec, False
    try:
        inbox.apply(name)
    except StaleFencingToken as exc:
        deps.handoff.lost(name, exc.token)
        return deps.store.settlement(rec.settlement_id), False
    return deps.store.settlement(rec.settlement_id), True
