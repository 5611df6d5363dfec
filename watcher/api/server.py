"""The HTTP application: every router mounted over one :class:`~watcher.api.deps.ApiDeps`.

This is the only module that knows all the routers; each router knows only ``deps`` and the
shared views and errors. Building the application starts nothing and registers no job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import FastAPI

from watcher import otel_tracing
from watcher.api import (
    chains,
    console,
    console_reads,
    deliveries,
    events,
    handoff,
    health,
    invoices,
    listing,
    receipts,
    settlements,
    sources,
    subscriptions,
    workflows,
)
from watcher.api.auth import install_auth
from watcher.api.body_limit import BodyLimit
from watcher.api.deps import ApiDeps, deps_of
from watcher.api.docs_pages import install_docs
from watcher.api.errors import install
from watcher.api.guards import Guards
from watcher.api.openapi_doc import install_openapi
from watcher.api.tracing_middleware import RequestSpans

if TYPE_CHECKING:
    from watcher.app.daemon import App


def build_app(deps: ApiDeps) -> FastAPI:
    """The API over ``deps``."""
    app = FastAPI(
        title="Finality Watcher",
        version="1",
        description="Says when a settlement is final, with the evidence, and never before.",
        # FastAPI's OpenTelemetry hooks: never configured here (no providers; uvicorn runs
        # with lifespan off, so nothing reads the OTEL environment), yet asking whether they
        # are cost 11 us a request, every request (bench/README.md, "API under load"). Off: the one cheap check.
        telemetry={"tracing": False, "metrics": False, "logs": False},
        docs_url=None,  # FastAPI's pages load from a CDN: ours serve local files
        redoc_url=None,
    )
    install(app)
    app.add_middleware(BodyLimit)  # bodies capped before anything reads them
    install_auth(app, deps.config.api)
    app.add_middleware(Guards, api=deps.config.api)  # Host and JSON-only checks
    if otel_tracing.enabled():  # asked once: without a tracer provider, no cost per request
        app.add_middleware(RequestSpans)  # outermost: refused requests are spans too
    settlements.install_read(app, deps)  # first: the read callers poll is matched first
    workflows.install_writes(app, deps)  # then the step writes agents make most
    settlements.install_create(app, deps)  # and the registration (its path's place kept)
    for topic in (
        settlements,
        listing,
        chains,
        events,
        health,
        receipts,
        deliveries,
        sources,
        handoff,
        subscriptions,
        invoices,
        console_reads,
        workflows,
    ):
        app.include_router(topic.router(deps))
    app.include_router(console.router())  # /ui/: the operator console's static page
    install_openapi(app)
    install_docs(app)
    return app


def create_app(app: App) -> FastAPI:
    """The API bound to a built daemon (what ``finality run`` serves)."""
    return build_app(deps_of(app))
