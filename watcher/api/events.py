"""``/v1/events``: alerts and lifecycle events in order, as a page or as a live stream.

With ``Accept: text/event-stream`` the route is a Server-Sent Events stream: one
``id:``/``event:``/``data:`` frame per stored event, from ``Last-Event-ID`` (or ``?after=``)
on; ``?kinds=reorg,finality_violation`` and ``?min_severity=warning`` filter it; with
``?heads=true`` it also carries a ``head`` frame (no id: not a stored event, nothing to
resume) each time a chain's recorded head moves, so a waiting client can show each new
depth as it happens, where no stored event marks it. A stream
ends after :data:`SSE_MAX_S` seconds with a ``retry:`` hint: EventSource clients reconnect by
themselves and resume from the last id, and a stopping daemon is never held up by an idle
listener for longer than that.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from watcher.api.auth import Reader
from watcher.api.deps import ApiDeps
from watcher.api.errors import error_response
from watcher.api.models.params import DIGITS_ONLY, MAX_ID
from watcher.api.models.views import EventView
from watcher.api.views import shown_event
from watcher.config.secrets import configured_secrets
from watcher.delivery.events_tail import EventTail
from watcher.delivery.format import SEVERITY_RANK
from watcher.store import ChainRecord, EventRecord

SSE_MAX_S = 15.0
"""Lifetime of one event stream; the client reconnects (``retry:``) and resumes."""

SSE_POLL_S = 0.25
"""How often a stream looks for new events."""

SSE_KEEPALIVE_S = 10.0
"""A comment line after this much silence keeps proxies from closing the stream."""

SSE_RETRY_MS = 1000
"""Reconnect delay suggested to clients."""


def router(deps: ApiDeps) -> APIRouter:
    """The events route over ``deps``."""
    api = APIRouter()
    secrets = configured_secrets(deps.config)

    @api.get(
        "/v1/events",
        response_model=list[EventView],
        response_model_exclude_unset=True,
        responses={
            200: {
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
                "description": "JSON by default; SSE frames with Accept: text/event-stream",
            }
        },
    )
    def list_events(
        caller: Reader,
        request: Request,
        after: Annotated[int, Query(ge=0, le=MAX_ID), DIGITS_ONLY] = 0,
        limit: Annotated[int, Query(ge=1, le=1000), DIGITS_ONLY] = 100,
    ) -> Any:
        """Alerts and lifecycle events in order; page with ``after`` = the last id seen.

        With ``Accept: text/event-stream`` this is a Server-Sent Events stream instead
        (resumable with ``Last-Event-ID``; see :mod:`watcher.api.events`)."""
        if "text/event-stream" in request.headers.get("accept", ""):
            return event_stream(deps, request, after, caller.name)
        events = deps.store.events(after_id=after, limit=limit, owner=caller.name)
        return [shown_event(e, secrets) for e in events]

    return api


def event_stream(deps: ApiDeps, request: Request, after: int, owner: str) -> Response:
    """``GET /v1/events`` as Server-Sent Events (see the module doc), of what ``owner`` may
    see: the tail reads every event (a gap in the ids must mean a late commit, not another
    caller's event), then drops the others' and cuts the chain-wide ones' ``touched``."""
    secrets = configured_secrets(deps.config)
    start = _resumed_at(request, after)
    if isinstance(start, Response):
        return start
    kinds_param = request.query_params.get("kinds")
    kinds = {k.strip() for k in kinds_param.split(",") if k.strip()} if kinds_param else None
    min_severity = request.query_params.get("min_severity", "info")
    if min_severity not in SEVERITY_RANK:
        return error_response(
            422,
            f"min_severity: must be one of {', '.join(SEVERITY_RANK)}, got {min_severity!r}",
            fields=["min_severity"],
        )
    floor = SEVERITY_RANK[min_severity]
    shown_heads = _heads_wanted(request)
    if isinstance(shown_heads, Response):
        return shown_heads

    async def frames() -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        end = loop.time() + SSE_MAX_S
        quiet_since = loop.time()
        tail: EventTail[EventRecord] = EventTail(start)
        yield f"retry: {SSE_RETRY_MS}\n\n".encode()
        while loop.time() < end:
            if await request.is_disconnected():
                return
            for frame in await _moved_heads(deps, shown_heads):
                yield frame
                quiet_since = loop.time()
            events = await run_in_threadpool(deps.store.events, None, tail.last, 200)
            ready = tail.take(events)
            if ready:
                ready = await run_in_threadpool(deps.store.visible_to, ready, owner)
            for event in ready:
                if kinds is not None and event.kind not in kinds:
                    continue
                if SEVERITY_RANK.get(event.severity, 0) < floor:
                    continue
                data = json.dumps(
                    shown_event(event, secrets), sort_keys=True, separators=(",", ":")
                )
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


def _heads_wanted(request: Request) -> dict[str, int | None] | Response | None:
    """``?heads=true``: the heads shown so far (none yet); ``false`` or absent: None; else a
    422 answer naming ``heads``."""
    heads = request.query_params.get("heads", "false")
    if heads not in ("true", "false"):
        return error_response(422, f"heads: must be true or false, got {heads!r}", fields=["heads"])
    return {} if heads == "true" else None


async def _moved_heads(deps: ApiDeps, shown: dict[str, int | None] | None) -> list[bytes]:
    """The head frames due now (none when the stream was not asked for heads)."""
    if shown is None:
        return []
    return head_frames(await run_in_threadpool(deps.store.chains), shown)


def head_frames(chains: Mapping[str, ChainRecord], shown: dict[str, int | None]) -> list[bytes]:
    """A ``head`` frame per chain whose recorded head is not the one last shown (``shown``
    is updated): ``{"kind": "head", "chain", "head_number", "head_hash"}``, without an id."""
    out: list[bytes] = []
    for name, record in sorted(chains.items()):
        if record.head_number is None or shown.get(name) == record.head_number:
            continue
        shown[name] = record.head_number
        data = json.dumps(
            {
                "kind": "head",
                "chain": name,
                "head_number": record.head_number,
                "head_hash": record.head_hash,
            },
            sort_keys=True,
            separators=(",", ":"),
        )
        out.append(f"event: head\ndata: {data}\n\n".encode())
    return out


def _resumed_at(request: Request, after: int) -> int | Response:
    """Where a stream starts: after ``Last-Event-ID`` when the client sent one (a
    reconnect), else after ``after``; a 422 answer if the header is not an event id."""
    header = request.headers.get("last-event-id")
    if header is None or not header.strip():
        return after
    value = header.strip()
    if not (value.isascii() and value.isdigit()) or int(value) > MAX_ID:
        return error_response(
            422,
            f"Last-Event-ID: must be an event id (integer), got {header!r}",
            fields=["Last-Event-ID"],
        )
    return int(value)
