"""``/v1/deliveries``: the outbox, for operators.

- ``GET /v1/deliveries?state=dead&settlement_id=…&after=ID&limit=N`` lists outbox rows in
  id order (page with ``after`` = the last id seen); bodies are left out.
- ``GET /v1/deliveries/{id}`` shows one row with the body it sends.
- ``POST /v1/deliveries/{id}/replay`` makes a dead row pending again (same idempotency key,
  fresh attempts); 409 for a row that is not dead.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from chains.redact import redact_url
from watcher.api.auth import Admin, Caller, Reader
from watcher.api.deps import ApiDeps
from watcher.api.errors import error_response
from watcher.api.models.errors import ERRORS
from watcher.api.models.params import DIGITS_ONLY, MAX_ID
from watcher.api.models.views import DeliveryView
from watcher.store.outbox_states import COMMIT_CHANNEL
from watcher.store.outbox_store import (
    STATES,
    DeliveryNotFound,
    DeliveryNotReplayable,
    DeliveryRecord,
)


def delivery_json(rec: DeliveryRecord, with_body: bool = False) -> dict[str, Any]:
    """The public view of an outbox row."""
    view: dict[str, Any] = {
        "id": rec.id,
        "settlement_id": rec.settlement_id,
        "event_id": rec.event_id,
        "channel": rec.channel,
        "kind": rec.kind,
        # A commit goes to the caller's own commit_url (shown as given); an alert goes to
        # an operator's URL, whose path is often the secret (a Slack webhook): redacted.
        "url": rec.url if rec.channel == COMMIT_CHANNEL else redact_url(rec.url),
        "idempotency_key": rec.idempotency_key,
        "state": rec.state,
        "attempts": rec.attempts,
        "next_attempt_at": rec.next_attempt_at,
        "last_status": rec.last_status,
        "last_error": rec.last_error,
        "created_at": rec.created_at,
        "updated_at": rec.updated_at,
        "delivered_at": rec.delivered_at,
    }
    if with_body:
        view["body"] = rec.body
    return view


def _owner_filter(caller: Caller) -> str | None:
    """Whose deliveries a caller reads: an admin (who replays dead letters) every caller's and
    the alerts; anyone else only those of its own settlements."""
    return None if "admin" in caller.scopes else caller.name


DeliveryId = Annotated[int, Path(ge=1, le=MAX_ID), DIGITS_ONLY]
"""The ``delivery_id`` path parameter."""


def router(deps: ApiDeps) -> APIRouter:
    """The delivery routes over ``deps``."""
    api = APIRouter()
    outbox = deps.store.outbox()

    @api.get("/v1/deliveries", response_model=list[DeliveryView], response_model_exclude_unset=True)
    def list_deliveries(
        caller: Reader,
        state: str | None = Query(
            default=None,
            description="pending, sending, delivered, dead",
            json_schema_extra={"enum": list(STATES)},
        ),
        settlement_id: str | None = None,
        after: Annotated[int, Query(ge=0, le=MAX_ID), DIGITS_ONLY] = 0,
        limit: Annotated[int, Query(ge=1, le=1000), DIGITS_ONLY] = 100,
    ) -> Any:
        """Outbox rows in id order; ``state=dead`` lists what needs a replay."""
        if state is not None and state not in STATES:
            return error_response(
                422, f"state: must be one of {', '.join(STATES)}, got {state!r}", fields=["state"]
            )
        rows = outbox.list(state, settlement_id, after, limit, owner=_owner_filter(caller))
        return [delivery_json(r) for r in rows]

    @api.get(
        "/v1/deliveries/{delivery_id}",
        response_model=DeliveryView,
        response_model_exclude_unset=True,
    )
    def get_delivery(caller: Reader, delivery_id: DeliveryId) -> Any:
        """One outbox row, with the body it sends."""
        try:
            return delivery_json(
                outbox.get(delivery_id, owner=_owner_filter(caller)), with_body=True
            )
        except DeliveryNotFound as exc:
            return error_response(404, f"delivery_id: {exc}")

    @api.post(
        "/v1/deliveries/{delivery_id}/replay",
        response_model=DeliveryView,
        response_model_exclude_unset=True,
        responses={409: ERRORS[409]},
    )
    def replay_delivery(caller: Admin, delivery_id: DeliveryId) -> Any:
        """Send a dead delivery again: pending now, attempts reset, same Idempotency-Key."""
        try:
            rec = outbox.replay(delivery_id, deps.clock())
        except DeliveryNotFound as exc:
            return error_response(404, f"delivery_id: {exc}")
        except DeliveryNotReplayable as exc:
            return error_response(409, str(exc), state=exc.state)
        for sender in deps.senders:
            sender.wake.set()  # the row is due now
        return delivery_json(rec)

    return api
