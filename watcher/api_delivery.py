"""HTTP routes of delivery: the outbox for operators, and the live event stream.

- ``GET /v1/deliveries?state=dead&settlement_id=…&after=ID&limit=N`` lists outbox rows in
  id order (page with ``after`` = the last id seen); bodies are left out.
- ``GET /v1/deliveries/{id}`` shows one row with the body it sends.
- ``POST /v1/deliveries/{id}/replay`` makes a dead row pending again (same idempotency key,
  fresh attempts); 409 for a row that is not dead.
- ``GET /v1/events`` with ``Accept: text/event-stream`` (wired in :mod:`watcher.api`) is a
  Server-Sent Events stream: one ``id:``/``event:``/``data:`` frame per stored event, from
  ``Last-Event-ID`` (or ``?after=``) on; ``?kinds=reorg,finality_violation`` and
  ``?min_severity=warning`` filter it. A stream ends after :data:`SSE_MAX_S` seconds with a
  ``retry:`` hint: EventSource clients reconnect by themselves and resume from the last id,
  and a stopping daemon is never held up by an idle listener for longer than that.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from watcher.delivery.events_tail import EventTail
from watcher.delivery.format import SEVERITY_RANK, event_json
from watcher.store.outbox_store import (
    STATES,
    DeliveryNotFound,
    DeliveryNotReplayable,
    DeliveryRecord,
)

if TYPE_CHECKING:
    from watcher.app import Service
    from watcher.store import EventRecord

SSE_MAX_S = 15.0
"""Lifetime of one event stream; the client reconnects (``retry:``) and resumes."""

SSE_POLL_S = 0.25
"""How often a stream looks for new events."""

SSE_KEEPALIVE_S = 10.0
"""A comment line after this much silence keeps proxies from closing the stream."""

SSE_RETRY_MS = 1000
"""Reconnect delay suggested to clients."""


def delivery_json(rec: DeliveryRecord, with_body: bool = False) -> dict[str, Any]:
    """The public view of an outbox row."""
    view: dict[str, Any] = {
        "id": rec.id,
        "settlement_id": rec.settlement_id,
        "event_id": rec.event_id,
        "channel": rec.channel,
        "kind": rec.kind,
        "url": rec.url,
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


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status)


def router(service: Service) -> APIRouter:
    """The delivery routes bound to ``service``."""
    api = APIRouter()
    outbox = service.store.outbox()

    @api.get("/v1/deliveries", response_model=list[dict[str, Any]])
    def list_deliveries(
        state: str | None = Query(default=None, description="pending, sending, delivered, dead"),
        settlement_id: str | None = None,
        after: int = Query(default=0, ge=0),
        limit: int = Query(default=100, ge=1, le=1000),
    ) -> Any:
        """Outbox rows in id order; ``state=dead`` lists what needs a replay."""
        if state is not None and state not in STATES:
            return _error(
                422, f"state: must be one of {', '.join(STATES)}, got {state!r}", fields=["state"]
            )
        rows = outbox.list(state, settlement_id, after, limit)
        return [delivery_json(r) for r in rows]

    @api.get("/v1/deliveries/{delivery_id}", response_model=dict[str, Any])
    def get_delivery(delivery_id: int) -> Any:
        """One outbox row, with the body it sends."""
        try:
            return delivery_json(outbox.get(delivery_id), with_body=True)
        except DeliveryNotFound as exc:
            return _error(404, f"delivery_id: {exc}")

    @api.post("/v1/deliveries/{delivery_id}/replay", response_model=dict[str, Any])
    def replay_delivery(delivery_id: int) -> Any:
        """Send a dead delivery again: pending now, attempts reset, same Idempotency-Key."""
        try:
            rec = outbox.replay(delivery_id, service.clock())
        except DeliveryNotFound as exc:
            return _error(404, f"delivery_id: {exc}")
        except DeliveryNotReplayable as exc:
            return _error(409, str(exc), state=exc.state)
        from watcher.delivery.sender import Sender

        for component in service.components:
            if isinstance(component, Sender):
                component.wake.set()  # the row is due now
        return delivery_json(rec)

    return api


def event_stream(service: Service, request: Request, after: int) -> Response:
    """``GET /v1/events`` as Server-Sent Events (see the module doc)."""
    start = after
    header = request.headers.get("last-event-id")
    if header is not None and header.strip():
        if not header.strip().isdigit():
            return _error(422, f"Last-Event-ID: must be an event id (integer), got {header!r}")
        start = int(header.strip())
    kinds_param = request.query_params.get("kinds")
    kinds = {k.strip() for k in kinds_param.split(",") if k.strip()} if kinds_param else None
    min_severity = request.query_params.get("min_severity", "info")
    if min_severity not in SEVERITY_RANK:
        return _error(
            422,
            f"min_severity: must be one of {', '.join(SEVERITY_RANK)}, got {min_severity!r}",
            fields=["min_severity"],
        )
    floor = SEVERITY_RANK[min_severity]

    async def frames() -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        end = loop.time() + SSE_MAX_S
        quiet_since = loop.time()
        tail: EventTail[EventRecord] = EventTail(start)
        yield f"retry: {SSE_RETRY_MS}\n\n".encode()
        while loop.time() < end:
            if await request.is_disconnected():
                return
            events = await run_in_threadpool(service.store.events, None, tail.last, 200)
            for event in tail.take(events):
                if kinds is not None and event.kind not in kinds:
                    continue
                if SEVERITY_RANK.get(event.severity, 0) < floor:
                    continue
                data = json.dumps(event_json(event), sort_keys=True, separators=(",", ":"))
                yield f"id: {event.id}\nevent: {event.kind}\ndata: {data}\n\n".encode()
                quiet_since = loop.time()
            if len(events) == 200 and not tail.holding:
                continue
            if loop.time() - quiet_since >= SSE_KEEPALIVE_S:
                yield b": keepalive\n\n"
                quiet_since = loop.time()
            await asyncio.sleep(SSE_POLL_S)

    return StreamingResponse(
        frames(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
