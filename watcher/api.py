"""The HTTP API (FastAPI): register settlements, follow them, ask about any tx hash.

Every error answers ``{"error": "<one line naming the field and the problem>", ...}`` with a
4xx status; nothing a client sends can corrupt stored state (registration is one insert,
idempotent on (chain, tx hash)). OpenAPI is served at ``/docs`` and ``/openapi.json``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CollectorRegistry, generate_latest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from chains import pool
from chains.errors import ChainError
from guard.errors import InvalidHash
from guard.hexes import parse_tx_hash
from watcher.api_receipts import view_parts, wait_signed
from watcher.api_sources import register_source_settlement, source_view
from watcher.app import Service
from watcher.config.errors import UnknownChainName
from watcher.engine.heads import heads_report
from watcher.metrics import ServiceCollector
from watcher.recorded_heads import recorded_head, recorded_heads
from watcher.sender_facts import FieldProblem, sender_facts
from watcher.settlements import Registration, register, settlement_view
from watcher.store import SettlementNotFound

MAX_DEPENDENT_STATE_BYTES = 64 * 1024
"""Default largest ``dependent_state``; the limit applied is ``[delivery]
max_dependent_state_bytes``."""

MAX_LIVE_CONFIRMATIONS = 2**31 - 1
"""Largest N a live answer accepts (decisions encode integers below 2**53)."""


class ApiError(Exception):
    """An error answer: status, one-line message, optional extra fields."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


class SettlementRequest(BaseModel):
    """Body of ``POST /v1/settlements``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    chain: str = Field(description="Configured chain name, e.g. 'local'.")
    tx_hash: str = Field(description="0x + 64 hex digits.")
    confirmations: int | None = Field(
        default=None, ge=1, description="Depth N; chain default if omitted."
    )
    timeout_s: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="Seconds until treated as failed."
    )
    dependent_state: dict[str, Any] | None = Field(
        default=None, description="State to commit on finality."
    )
    commit_url: str | None = Field(
        default=None, description="Where commit/discard events are POSTed."
    )
    provisional: bool = Field(
        default=False,
        description="Also POST inclusion and depth updates before finality, each marked "
        "provisional (for state that can be reversed).",
    )
    sender: str | None = Field(
        default=None, description="The tx's sender (with nonce): no lookup by hash."
    )
    nonce: int | None = Field(default=None, description="The tx's nonce (with sender).")
    raw_tx: str | None = Field(
        default=None, description="The signed tx (0x hex), checked against tx_hash."
    )

    @field_validator("tx_hash")
    @classmethod
    def _check_hash(cls, value: str) -> str:
        try:
            return str(parse_tx_hash(value))
        except InvalidHash as exc:
            raise ValueError(str(exc).removeprefix("tx_hash: ")) from None

    @field_validator("commit_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value


def canonical_or_error(state: dict[str, Any]) -> None:
    """Refuse dependent state without a canonical JSON form (a float): its digest is signed
    into the binding receipt."""
    from guard.canonical import CanonicalError, canonical_json

    try:
        canonical_json(state)
    except CanonicalError as exc:
        message = str(exc).replace("$", "dependent_state", 1)
        raise ApiError(422, message, fields=["dependent_state"]) from None


def _field_of(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path")]
    return ".".join(parts) or "body"


def create_app(service: Service) -> FastAPI:
    """The API bound to a running :class:`Service`."""
    app = FastAPI(
        title="Finality Watcher",
        version="1",
        description="Says when a settlement is final, with the evidence, and never before.",
    )
    registry = CollectorRegistry()
    registry.register(ServiceCollector(service))

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse({"error": exc.message, **exc.extra}, status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            f"{_field_of(tuple(err.get('loc', ())))}: {str(err.get('msg', 'invalid')).removeprefix('Value error, ')}"
            for err in exc.errors()
        ]
        fields = [_field_of(tuple(err.get("loc", ()))) for err in exc.errors()]
        return JSONResponse({"error": "; ".join(problems), "fields": fields}, status_code=422)

    def chain_or_error(name: str, status: int = 404) -> Any:
        try:
            return service.chain_config(name)
        except UnknownChainName:
            known = [c.name for c in service.config.chains]
            raise ApiError(
                status,
                f"chain: unknown chain {name!r}; known chains: {', '.join(known)}",
                known_chains=known,
            ) from None

    def head_of(chain: str) -> int | None:
        return recorded_head(service.store, chain)  # the owner's, not this instance's tracker

    @app.post("/v1/settlements", status_code=201)
    def create_settlement(payload: Annotated[dict[str, Any], Body()]) -> JSONResponse:
        """Register a settlement; 200 with the same settlement if it was already registered.

        ``kind`` is ``evm_tx`` by default (``chain``, ``tx_hash``...); a source kind
        (``stripe_payment_intent``, ``rq_job``, ``celery_task``) takes ``ref`` and
        ``source`` instead (docs/sources.md)."""
        if payload.get("kind", "evm_tx") != "evm_tx":
            view, status = register_source_settlement(service, payload)
            return JSONResponse(view, status_code=status)
        try:
            body = SettlementRequest.model_validate(
                {k: v for k, v in payload.items() if k != "kind"}
            )
        except ValidationError as exc:
            raise RequestValidationError(exc.errors(include_url=False)) from None
        chain = chain_or_error(body.chain, 422)
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
            import json

            try:
                encoded = json.dumps(body.dependent_state, separators=(",", ":"), allow_nan=False)
            except ValueError:
                raise ApiError(
                    422,
                    "dependent_state: must be JSON without NaN or Infinity",
                    fields=["dependent_state"],
                ) from None
            size = len(encoded.encode())
            limit = service.config.delivery.max_dependent_state_bytes
            if size > limit:
                raise ApiError(
                    413,
                    f"dependent_state: {size} bytes is over the limit of {limit} bytes",
                    limit=limit,
                )
            canonical_or_error(body.dependent_state)
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
            from dataclasses import replace

            from watcher.settlements import new_settlement

            new = replace(new_settlement(registration, service.clock()), provisional=True)
            rec, created = service.store.register(new)
        else:
            rec, created = register(service.store, registration, service.clock())
        view = settlement_view(rec, head_of(rec.chain), **view_parts(service, rec))
        return JSONResponse(view, status_code=201 if created else 200)

    @app.get("/v1/settlements/{settlement_id}")
    def get_settlement(settlement_id: str) -> dict[str, Any]:
        """A registered settlement's current view."""
        try:
            rec = service.store.settlement(settlement_id)
        except SettlementNotFound:
            raise ApiError(404, f"settlement_id: no settlement {settlement_id!r}") from None
        view = source_view(service, rec)
        if view is not None:
            return view
        return settlement_view(rec, head_of(rec.chain), **view_parts(service, rec))

    @app.get("/v1/settlements/{settlement_id}/receipt")
    def get_receipt(settlement_id: str) -> dict[str, Any]:
        """The latest signed receipt of the terminal verdict (a document `finality verify`
        checks offline); 404 while the settlement is not terminal or not yet signed."""
        try:
            rec = service.store.settlement(settlement_id)
        except SettlementNotFound:
            raise ApiError(404, f"settlement_id: no settlement {settlement_id!r}") from None
        receipt = wait_signed(service, rec) if rec.verdict_enum.terminal else None
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

    @app.get("/v1/settlements/{settlement_id}/events")
    def get_settlement_events(settlement_id: str) -> list[dict[str, Any]]:
        """Events (confirmed, failed, reorg, violations) recorded for one settlement."""
        get_settlement(settlement_id)
        return [_event_json(e) for e in service.store.events(settlement_id=settlement_id)]

    @app.get("/v1/chains/{chain}/txs/{tx_hash}")
    def get_tx(
        chain: str,
        tx_hash: str,
        confirmations: int | None = Query(default=None, ge=1, le=MAX_LIVE_CONFIRMATIONS),
    ) -> dict[str, Any]:
        """Verdict for any tx hash: the registered settlement, or a live answer from the node."""
        config = chain_or_error(chain)
        try:
            tx = parse_tx_hash(tx_hash)
        except InvalidHash as exc:
            raise ApiError(422, f"tx_hash: {exc}", fields=["tx_hash"]) from None
        try:
            rec = service.store.settlement_by_tx(chain, tx)
            return settlement_view(rec, head_of(chain), **view_parts(service, rec))
        except SettlementNotFound:
            pass
        from watcher.engine.live import live_view

        try:
            return live_view(service.clients[chain], config, tx, confirmations, service.clock())
        except ChainError as exc:
            raise ApiError(
                503, f"chain {chain!r}: node unavailable for a live answer: {exc}"
            ) from None

    @app.get("/v1/chains")
    def list_chains() -> list[dict[str, Any]]:
        """Configured chains with their head, health and RPC use."""
        out = []
        recorded = service.store.chains()  # the heads the owners recorded, on every instance
        for chain in service.config.chains:
            watcher = service.watchers[chain.name]
            health = service.health[chain.name]
            head = recorded.get(chain.name)
            out.append(
                {
                    "name": chain.name,
                    "chain_id": chain.chain_id,
                    "confirmations": chain.resolved_confirmations,
                    "finality": chain.resolved_finality,
                    "poll_interval_s": chain.resolved_poll_interval_s,
                    "head_number": head.head_number if head else None,
                    "head_hash": head.head_hash if head else None,
                    "finalized_number": head.finalized_number if head else None,
                    "healthy": service.healthy(chain.name),
                    "lagging": watcher.lagging,
                    "last_error": health.last_error,
                    "watched": len(watcher.index.by_id),
                    "rpc": _endpoints(chain.rpc, pool.health_report(service.clients[chain.name])),
                    "rpc_calls": dict(service.clients[chain.name].calls),
                    "budget": service.budget_status(chain.name),
                    "heads": heads_report(service, chain.name),
                }
            )
        return out

    @app.get("/v1/reorgs")
    def list_reorgs(
        chain: str | None = None, limit: int = Query(default=100, ge=1, le=1000)
    ) -> list[dict[str, Any]]:
        """Reorgs seen, newest first, with depth, common ancestor and touched settlements."""
        if chain is not None:
            chain_or_error(chain)
        return [
            {
                "id": r.id,
                "chain": r.chain,
                "detected_at": r.detected_at,
                "depth": r.depth,
                "common_ancestor": {"number": r.ancestor_number, "hash": r.ancestor_hash},
                "old_head": {"number": r.old_head_number, "hash": r.old_head_hash},
                "new_head": {"number": r.new_head_number, "hash": r.new_head_hash},
                "replaced": r.replaced,
                "touched": r.touched,
                "finality_violation": r.finality_violation,
            }
            for r in service.store.reorgs(chain, limit)
        ]

    @app.get("/v1/events", response_model=list[dict[str, Any]])
    def list_events(
        request: Request,
        after: int = Query(default=0, ge=0),
        limit: int = Query(default=100, ge=1, le=1000),
    ) -> Any:
        """Alerts and lifecycle events in order; page with ``after`` = the last id seen.

        With ``Accept: text/event-stream`` this is a Server-Sent Events stream instead
        (resumable with ``Last-Event-ID``; see ``watcher.api_delivery``)."""
        if "text/event-stream" in request.headers.get("accept", ""):
            from watcher.api_delivery import event_stream

            return event_stream(service, request, after)
        return [_event_json(e) for e in service.store.events(after_id=after, limit=limit)]

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        """200 when every chain polled successfully of late, else 503 with the reasons."""
        recorded, store_error = recorded_heads(service.store)
        chains = {
            c.name: {
                "healthy": service.healthy(c.name),
                "last_error": service.health[c.name].last_error,
                "head_number": recorded[c.name].head_number if c.name in recorded else None,
            }
            for c in service.config.chains
        }
        ok = store_error is None and all(v["healthy"] for v in chains.values())
        body: dict[str, Any] = {"ok": ok, "chains": chains}
        if store_error is not None:
            body["store_error"] = store_error
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/metrics")
    def metrics() -> PlainTextResponse:
        """Prometheus text format."""
        return PlainTextResponse(
            generate_latest(registry).decode(), media_type="text/plain; version=0.0.4"
        )

    from watcher import api_delivery, api_handoff, api_receipts, api_sources

    app.include_router(api_receipts.router(service))
    app.include_router(api_delivery.router(service))
    app.include_router(api_sources.router(service))
    app.include_router(api_handoff.router(service))
    return app


def _event_json(e: Any) -> dict[str, Any]:
    return {
        "id": e.id,
        "chain": e.chain,
        "settlement_id": e.settlement_id,
        "kind": e.kind,
        "severity": e.severity,
        "payload": e.payload,
        "created_at": e.created_at,
    }


def _endpoints(urls: list[str], health: list[dict[str, object]] | None) -> list[dict[str, object]]:
    """The chain's endpoints (redacted), with each one's health when there are several."""
    if health is None:
        return [{"endpoint": _redact(url)} for url in urls]
    return [{**h, "endpoint": _redact(url)} for url, h in zip(urls, health, strict=True)]


def _redact(url: str) -> str:
    """Hide credentials and API keys in an endpoint URL (keep scheme and host)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    tail = "/…" if parts.path.strip("/") or parts.query else ""
    return f"{parts.scheme}://{host}{port}{tail}"
