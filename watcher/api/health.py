"""``/healthz`` (is this instance ready, and if not, why) and ``/metrics`` (Prometheus)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CollectorRegistry, generate_latest

from chains import pool
from chains.health import why_unused
from chains.redact import redact_url
from watcher.api.auth import require
from watcher.api.deps import ApiDeps
from watcher.api.metrics.collector import ServiceCollector
from watcher.api.models.views import HealthView
from watcher.api.recorded_heads import recorded_heads
from watcher.api.views import shown_error
from watcher.config.secrets import configured_secrets


def router(deps: ApiDeps) -> APIRouter:
    """The health and metrics routes over ``deps``."""
    api = APIRouter()
    registry = CollectorRegistry()
    registry.register(ServiceCollector(deps))
    secrets = configured_secrets(deps.config)
    # Open by default (probes carry no token); [api] open_health = false: they need read.
    guarded = [] if deps.config.api.open_health else [Depends(require(deps, "read"))]

    @api.get(
        "/healthz",
        dependencies=guarded,
        response_model=None,
        responses={
            200: {"model": HealthView},
            503: {"model": HealthView, "description": "Not healthy (same body)"},
        },
    )
    def healthz() -> JSONResponse:
        """200 when every chain polled successfully of late and the store can be read and
        written, else 503 with the reasons (``store_error``: why the store cannot)."""
        recorded, store_error = recorded_heads(deps.store)
        # A store that reads but cannot be written is not ready either: said at once, by name.
        store_error = deps.store.write_problem() or store_error
        chains = {
            c.name: {
                "healthy": deps.chains.healthy(c.name),
                "last_error": shown_error(deps.chains.last_error(c.name), secrets),
                "head_number": recorded[c.name].head_number if c.name in recorded else None,
                "endpoints_unused": unused_endpoints(deps, c.name, secrets),
            }
            for c in deps.config.chains
        }
        ok = store_error is None and all(v["healthy"] for v in chains.values())
        body: dict[str, Any] = {"ok": ok, "chains": chains}
        if store_error is not None:
            body["store_error"] = store_error
        return JSONResponse(body, status_code=200 if ok else 503)

    @api.get(
        "/metrics",
        dependencies=guarded,
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    def metrics() -> PlainTextResponse:
        """Prometheus text format."""
        return PlainTextResponse(
            generate_latest(registry).decode(), media_type="text/plain; version=0.0.4"
        )

    return api


def unused_endpoints(deps: ApiDeps, chain: str, secrets: list[str]) -> list[dict[str, Any]]:
    """The endpoints of a chain read through several that are not used now, each with its
    state (``inconsistent``: its data failed a check; ``open``, ``stalled``…) and why; the
    chain itself may still be healthy on the others. Empty with a single endpoint (its
    trouble is the chain's ``last_error``)."""
    report = pool.health_report(deps.clients[chain]) or []
    return [
        {
            "endpoint": redact_url(str(e["endpoint"])),
            "state": e["state"],
            "reason": shown_error(why_unused(e), secrets),
        }
        for e in report
        if e["state"] not in ("closed", "half_open")
    ]
