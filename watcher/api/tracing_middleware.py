"""A span per HTTP request (``finality.api_request``), installed only when tracing is on.

Outermost, so a request refused by the guards or the body limit is a span too. Attributes:
the method, the path (ids and hashes only; the query string is left out) and the status;
never a header or a body.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from watcher import otel_tracing


class RequestSpans:
    """ASGI middleware: one span around each HTTP request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        attributes = {"http.method": str(scope["method"]), "url.path": str(scope["path"])}
        with otel_tracing.span("finality.api_request", attributes) as current:

            async def send_noting_status(message: Message) -> None:
                if message["type"] == "http.response.start":
                    current.set_attribute("http.status_code", int(message["status"]))
                await send(message)

            await self.app(scope, receive, send_noting_status)
