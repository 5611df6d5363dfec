"""HTTP for off-chain sources: registering their settlements, and Stripe's webhooks.

* :func:`register_source_settlement` validates a ``POST /v1/settlements`` body whose
  ``kind`` is a source kind (``stripe_payment_intent``, ``rq_job``, ``celery_task``, or a
  plugin's) and registers it: ``{"kind", "ref", "source"?, "timeout_s"?,
  "dependent_state"?, "commit_url"?}``. ``source`` may be omitted when exactly one source of
  that kind is configured. Answers as the chain registration does: 201 with the view, 200
  with the same settlement if it was registered already, 4xx naming the field.
* ``POST /v1/webhooks/stripe`` (the only Stripe source with a ``webhook_secret``) and
  ``POST /v1/webhooks/stripe/{source}``: Stripe's signed events. A bad, missing or stale
  ``Stripe-Signature`` is answered 400 and nothing is stored; an event about a
  PaymentIntent nobody registered is acknowledged (200, ``matched: false``) so that Stripe
  does not retry it for days; a store failure is 503, so that Stripe does retry.

Several instances on one PostgreSQL (docs/handoff.md): whichever instance Stripe reaches
first stores the verified event in the **webhook inbox** (table ``webhook_inbox``, one row
per source and event id, so a redelivery is stored once) before answering; nothing else. The
verdict is changed only by the source's lease owner, under its fencing token: the receiving
instance applies the inbox at once when it is the owner (200 with the verdict), otherwise it
answers 202 (``queued: true``) and the owner applies it at its next lease check (every
``renew_s``, at most 0.5 s), marking the row applied under its token. A crash between the
verdict write and the mark re-applies the event once more, which changes nothing (Stripe
objects replace older ones, refunds and disputes accumulate by id, event ids are a set). A
stale owner's apply and mark are refused by the store like any fenced write.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from guard.canonical import CanonicalError, canonical_json
from guard.source import InvalidRef, Snapshot
from guard.types import UnixMillis
from watcher.sources.poller import SourcePoller, SourceSlot, sources_of
from watcher.sources.registry import EVM_KIND
from watcher.sources.settlements import new_source_settlement, source_settlement_view
from watcher.sources.stripe_settings import KIND as STRIPE_KIND
from watcher.sources.stripe_settings import StripeSettings
from watcher.sources.stripe_webhooks import WebhookRejected, payment_intent_of, verify_webhook
from watcher.store import SettlementNotFound, SettlementRecord, StaleFencingToken, StoreError
from watcher.store.records import InboxRecord

if TYPE_CHECKING:
    from watcher.app import Service

FIELDS = ("kind", "ref", "source", "timeout_s", "dependent_state", "commit_url")
"""The keys a source registration accepts."""

MAX_WEBHOOK_BYTES = 1 << 20
"""Largest webhook body read (Stripe's events are far smaller)."""


def register_source_settlement(
    service: Service, body: dict[str, Any]
) -> tuple[dict[str, Any], int]:
    """Validate and register a source settlement; returns (JSON body, HTTP status).

    Errors are ``({"error": "FIELD: what is wrong", "fields": [FIELD]}, 4xx)``: 422 for a
    bad field, 413 for dependent state over ``[delivery] max_dependent_state_bytes``.
    Nothing is stored unless the whole body is valid."""
    if not isinstance(body, dict):
        return _error(422, "body: must be a JSON object", "body")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        return _error(422, f"{unknown[0]}: unknown field (allowed: {', '.join(FIELDS)})", *unknown)
    poller = sources_of(service)
    slots = poller.slots if poller is not None else {}
    slot_or_error = _slot(slots, body.get("kind"), body.get("source"))
    if isinstance(slot_or_error, tuple):
        return slot_or_error
    slot = slot_or_error
    if body.get("ref") is None:
        return _error(422, "ref: is required", "ref")
    try:
        ref = slot.source.check_ref(body["ref"])
    except InvalidRef as exc:
        return _error(422, str(exc), "ref")
    timeout_s = body.get("timeout_s")
    if timeout_s is not None:
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float):
            return _error(422, "timeout_s: must be a number of seconds", "timeout_s")
        if not math.isfinite(timeout_s) or timeout_s <= 0:
            return _error(422, "timeout_s: must be a finite number > 0", "timeout_s")
        timeout_s = min(float(timeout_s), slot.config.max_wait_s)  # the policy caps it anyway
    state = body.get("dependent_state")
    if state is not None:
        problem = _check_state(service, state)
        if problem is not None:
            return problem
    commit_url = body.get("commit_url")
    if commit_url is not None and (
        not isinstance(commit_url, str) or not commit_url.startswith(("http://", "https://"))
    ):
        return _error(422, "commit_url: must be an http:// or https:// URL", "commit_url")
    new = new_source_settlement(slot.config, ref, service.clock(), timeout_s, state, commit_url)
    rec, created = service.store.register(new)
    if created and poller is not None:
        poller.kick(slot.config.name)
    return _view(service, rec), 201 if created else 200


def source_view(service: Service, rec: SettlementRecord) -> dict[str, Any] | None:
    """The view of ``rec`` if it belongs to a configured source (None for a chain's): what
    ``GET /v1/settlements/{id}`` answers for a source settlement."""
    poller = sources_of(service)
    if poller is None or rec.chain not in poller.slots:
        return None
    return _view(service, rec)


def _view(service: Service, rec: SettlementRecord) -> dict[str, Any]:
    """The source view with the latest signed receipt, once one exists for its verdict."""
    from watcher.api_receipts import latest_signed
    from watcher.receipts import binding_for

    receipt = latest_signed(service, rec.settlement_id) if rec.verdict_enum.terminal else None
    binding = binding_for(service, rec) if rec.dependent_state is not None else None
    return source_settlement_view(rec, receipt, binding)


def router(service: Service) -> APIRouter:
    """The Stripe webhook routes (and, after each lease check, the owner's pass over the
    inbox they feed)."""
    api = APIRouter()
    if not any(getattr(h, "__name__", "") == "_inbox" for h in service.handoff.after_tick):

        def _inbox() -> None:
            inbox_job(service)

        service.handoff.after_tick.append(_inbox)

    @api.post("/v1/webhooks/stripe")
    async def stripe_webhook(request: Request) -> JSONResponse:
        """Stripe's signed event for the one Stripe source that has a ``webhook_secret``."""
        return await _stripe_event(service, request, None)

    @api.post("/v1/webhooks/stripe/{source}")
    async def stripe_webhook_for(source: str, request: Request) -> JSONResponse:
        """Stripe's signed event for the Stripe source named ``source``."""
        return await _stripe_event(service, request, source)

    return api


async def _stripe_event(service: Service, request: Request, name: str | None) -> JSONResponse:
    poller = sources_of(service)
    slots = poller.slots if poller is not None else {}
    hooked = [s for s in slots.values() if s.config.kind == STRIPE_KIND and s.config.webhook_secret]
    if name is not None:
        hooked = [s for s in hooked if s.config.name == name]
    if poller is None or len(hooked) != 1:
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
    slot = hooked[0]
    settings = StripeSettings.narrow(slot.config)
    secret = settings.webhook_secret
    assert secret is not None
    payload = await request.body()
    if len(payload) > MAX_WEBHOOK_BYTES:
        return JSONResponse({"error": "body: larger than 1 MiB"}, status_code=413)
    try:
        event = verify_webhook(
            payload,
            request.headers.get("stripe-signature"),
            secret,
            settings.webhook_tolerance_s,
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
        rec, applied = await run_in_threadpool(_receive, service, poller, slot, ref, event)
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
    service: Service, poller: SourcePoller, slot: SourceSlot, ref: str, event: dict[str, Any]
) -> tuple[SettlementRecord | None, bool]:
    """Store the event in the inbox (any instance), then apply the inbox if this instance
    owns the source. Returns (the settlement as stored now, whether it was applied here)."""
    name = slot.config.name
    try:
        rec = service.store.settlement_by_tx(name, ref)
    except SettlementNotFound:
        return None, False  # nobody registered it: acknowledged, nothing kept (as ever)
    inbox_add(service, name, ref, event)
    if not service.handoff.owns(name):
        return rec, False
    try:
        apply_inbox(service, poller, name)
    except StaleFencingToken as exc:
        service.handoff.lost(name, exc.token)
        return service.store.settlement(rec.settlement_id), False
    return service.store.settlement(rec.settlement_id), True


# -- the webhook inbox -------------------------------------------------------------------------

INBOX_BATCH = 100
"""Inbox rows applied at most per pass (the rest at the next lease check)."""


def inbox_add(service: Service, source: str, ref: str, event: dict[str, Any]) -> None:
    """Store a verified event durably (unfenced: it decides nothing); a redelivery of an
    event already stored is a no-op."""
    service.store.inbox().add(
        source, ref, str(event["id"]), event, service.handoff.instance_id, service.clock()
    )  # False: Stripe redelivered an event the inbox holds already


def inbox_pending(service: Service, source: str) -> list[InboxRecord]:
    """Inbox rows of ``source`` not applied yet, oldest first."""
    return service.store.inbox().pending(source, INBOX_BATCH)


def apply_inbox(service: Service, poller: SourcePoller, source: str) -> int:
    """Apply the pending inbox rows of ``source`` (this instance must own it: every write is
    fenced and a stale token raises :class:`StaleFencingToken`); returns how many."""
    done = 0
    for row in inbox_pending(service, source):
        event = dict(row.event)
        snapshot = Snapshot(row.ref, UnixMillis(row.received_at), {"event": event}, (row.event_id,))
        poller.receive(source, row.ref, snapshot)  # fenced by the poller (fence_of)
        _mark_applied(service, source, row.id)
        done += 1
    return done


def _mark_applied(service: Service, source: str, row_id: int) -> None:
    """Mark one inbox row applied, under the source's fence (a stale owner cannot)."""
    service.store.inbox().mark_applied(
        source, row_id, service.clock(), service.handoff.instance_id, service.handoff.fence(source)
    )


def inbox_job(service: Service) -> None:
    """After each lease check: apply the inbox of every Stripe source this instance owns
    (webhooks a standby received). Refusals stop at once: the lease is gone."""
    poller = sources_of(service)
    if poller is None:
        return
    for name, slot in poller.slots.items():
        if slot.config.kind != STRIPE_KIND or not service.handoff.owns(name):
            continue
        try:
            apply_inbox(service, poller, name)
        except StaleFencingToken as exc:
            service.handoff.lost(name, exc.token)


def _slot(
    slots: dict[str, SourceSlot], kind: object, source: object
) -> SourceSlot | tuple[dict[str, Any], int]:
    """The source a registration names (by ``source``, or as the only one of ``kind``)."""
    configured = ", ".join(f"{n} ({s.config.kind})" for n, s in slots.items()) or "none"
    if not isinstance(kind, str):
        return _error(422, "kind: is required (a string)", "kind")
    if kind == EVM_KIND:
        return _error(422, "kind: evm_tx settlements are registered with chain and tx_hash", "kind")
    if source is not None:
        if not isinstance(source, str) or source not in slots:
            return _error(
                422,
                f"source: unknown source {source!r}; configured sources: {configured}",
                "source",
            )
        slot = slots[source]
        if slot.config.kind != kind:
            return _error(
                422, f"source: {source!r} is a {slot.config.kind} source, not {kind}", "source"
            )
        return slot
    of_kind = [s for s in slots.values() if s.config.kind == kind]
    if not of_kind:
        return _error(
            422, f"kind: no source of kind {kind!r} is configured (sources: {configured})", "kind"
        )
    if len(of_kind) > 1:
        names = ", ".join(s.config.name for s in of_kind)
        return _error(
            422,
            f"source: is required: several sources of kind {kind} are configured ({names})",
            "source",
        )
    return of_kind[0]


def _check_state(service: Service, state: object) -> tuple[dict[str, Any], int] | None:
    """The dependent state's checks, as for chain registrations: an object, JSON without
    NaN, within the size limit, with a canonical form (its digest is signed)."""
    if not isinstance(state, dict):
        return _error(422, "dependent_state: must be a JSON object", "dependent_state")
    try:
        encoded = json.dumps(state, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return _error(
            422, "dependent_state: must be JSON without NaN or Infinity", "dependent_state"
        )
    size = len(encoded.encode())
    limit = service.config.delivery.max_dependent_state_bytes
    if size > limit:
        body, _ = _error(
            413,
            f"dependent_state: {size} bytes is over the limit of {limit} bytes",
            "dependent_state",
        )
        return {**body, "limit": limit}, 413
    try:
        canonical_json(state)
    except CanonicalError as exc:
        return _error(422, str(exc).replace("$", "dependent_state", 1), "dependent_state")
    return None


def _error(status: int, message: str, *fields: str) -> tuple[dict[str, Any], int]:
    return {"error": message, "fields": list(fields)}, status
