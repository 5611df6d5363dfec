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
from watcher.api.views import beacon_of, shown_error
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
                "healthy": deps.healthy(c.name),
                "last_error": shown_error(deps.status(c.name).health.last_error, secrets),
                "head_number": recorded[c.name].head_number if c.name in recorded else None,
                "endpoints_unused": unused_endpoints(deps, c.name, secrets),
                **beacon_health(deps, c.name, secrets),
            }
            for c in deps.config.chains
        }
        ok = store_error is None and all(
            v["healthy"] and v.get("receipts_waiting") is None for v in chains.values()
        )
        body: dict[str, Any] = {"ok": ok, "chains": chains}
        if store_error is not None:
            body["store_error"] = store_error
        # Named, not a 503: this instance serves and would take over; it is the frozen
        # owner's sessions that hold the chain (the takeover_blocked alert says so too).
        blocked = deps.handoff.blocked()
        if blocked:
            body["handoff_blocked"] = blocked
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
    return _described([e for e in report if e["state"] not in ("closed", "half_open")], secrets)


def beacon_health(deps: ApiDeps, chain: str, secrets: list[str]) -> dict[str, Any]:
    """A chain's Beacon API endpoints as ``/healthz`` reports them, only for a chain that has
    them: ``beacon_api_unused``, each endpoint not in use now with its state and why (a
    single one too: its trouble is not the chain's ``last_error``, since polling goes on
    without it), and ``receipts_waiting``, set when none is in use: the chain's finality
    receipts cannot be completed without a beacon node, so the instance is not ready (503)
    though the chain's verdicts go on. ``half_open`` counts as not in use here: the beacon
    is asked only while a receipt waits, so its next probe may be far off."""
    beacon = beacon_of(deps, chain)
    if beacon is None:
        return {}
    report = beacon.health_report()
    down = _described([e for e in report if e["state"] != "closed"], secrets)
    waiting = None
    if down and len(down) == len(report):
        waiting = (
            f"every Beacon API endpoint is down ({down[-1]['endpoint']}: {down[-1]['reason']}): "
            "finality receipts wait for Ethereum consensus (verdicts go on); bring a beacon "
            "node back or add a working one to [[chains]] beacon_api"
        )
    return {"beacon_api_unused": down, "receipts_waiting": waiting}


def _described(report: list[dict[str, object]], secrets: list[str]) -> list[dict[str, Any]]:
    """Endpoints of a health report as ``/healthz`` shows them: redacted, with their state
    and why they are not used (scrubbed of ``secrets``)."""
    return [
        {
            "endpoint": redact_url(str(e["endpoint"])),
            "state": e["state"],
            "reason": shown_error(why_unused(e), secrets),
        }
        for e in report
    ]
