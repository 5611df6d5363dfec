"""The writes callers make most (``POST /v1/settlements``, a workflow step's ``begin`` and
``complete``): one path, from the request to the bytes.

Under load most of such a write's time went to the framework around it, not to the write:
FastAPI's dependency solver and request wrapper (a ``Request``, two exit stacks, an exception
wrapper), the matching of an included router's routes. So, as the settlement read
(watcher/api/settlement_read.py), the route is declared as any other (the OpenAPI document,
the ``register`` scope, the request and answer schemas are the framework's), on the
application's own router before the topic routers, and its ASGI app is :class:`JsonWrite`'s:
it checks the token (:meth:`~watcher.api.auth.Require.check`, the dependency's own check),
reads the body once (``BodyLimit`` has capped it already), parses it as Starlette's
``Request.json`` does and validates it as FastAPI validates the route's body (its pydantic
model, or its declared type through the route's own body field), calls the endpoint and
sends its answer's bytes and headers.

Every request this path does not take as it is (no token or one without the scope, a body
that is not JSON or not valid, a path parameter out of its bounds, a content type other than
``application/json``) is handed, with the body read, to the handler FastAPI built for the
route: the refusal (its status, the 422's error list naming the field, which of the 401/403
and the 422 comes first) is the framework's own, byte for byte. A refusal by the write
itself (stale token, unknown step, a registration's terms) is raised as from any route and
answered by the application's handlers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from watcher.api.auth import Require
from watcher.api.body_limit import replay_body
from watcher.api.errors import ApiError

Endpoint = Callable[..., Coroutine[Any, Any, Response]]
"""The route's endpoint: ``(caller, **path parameters, **{body's name: body})`` to its
answer."""

_JSON = b"application/json"
_AUTHORIZATION = b"authorization"
_CONTENT_TYPE = b"content-type"


class JsonWrite(APIRoute):
    """The declared route whose ASGI app is :meth:`answer` (module doc); FastAPI's handler
    answers what the short path does not take."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        self.registrar = Require("register")
        if self.body_field is None or len(self.dependant.body_params) != 1:
            raise TypeError(f"{path}: a JSON write takes one body")
        self.body_name = self.dependant.body_params[0].name
        """The endpoint's parameter the body is passed as."""
        model = self.body_field.field_info.annotation
        field = self.body_field
        self.validate: Callable[[Any], Any] = (
            model.model_validate
            if isinstance(model, type) and issubclass(model, BaseModel)
            else lambda value: _valid(field.validate(value, loc=("body",)))
        )
        """The body's check, as FastAPI's: its model's own (the step writes), or through the
        route's body field (a JSON object: ``POST /v1/settlements``); raises on an invalid
        body."""
        self.path_fields = {field.alias: field for field in self.dependant.path_params}
        """The path parameters' fields, as FastAPI validates them (their ``Path`` bounds)."""
        self.framework = self.app
        """FastAPI's handler for the route: the answer to every request not taken as it is."""
        self.app = self.answer

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check, validate, write, send; or hand the request to FastAPI's handler."""
        body = await _body(receive)
        if body is None:  # the caller left before its body came: nothing to write or answer
            return
        taken = self._taken(scope, body)
        if taken is None:
            await self.framework(scope, replay_body(body, receive), send)
            return
        endpoint: Endpoint = self.endpoint
        body_arg = {self.body_name: taken[1]}
        answer = await endpoint(taken[0], **scope["path_params"], **body_arg)
        start = {"type": "http.response.start", "status": answer.status_code}
        await send({**start, "headers": answer.raw_headers})
        await send({"type": "http.response.body", "body": answer.body})

    def _taken(self, scope: Scope, body: bytes) -> tuple[Any, Any] | None:
        """The caller and the validated body, or None where FastAPI's handler answers."""
        authorization = content_type = None
        for name, value in scope["headers"]:
            if name == _AUTHORIZATION and authorization is None:
                authorization = value.decode("latin-1")
            elif name == _CONTENT_TYPE and content_type is None:
                content_type = value
        if content_type != _JSON:
            return None
        for name, value in scope["path_params"].items():
            if self.path_fields[name].validate(value, loc=("path", name))[1]:
                return None
        try:
            caller = self.registrar.check(scope.get("app"), authorization)
            # Parsed as Request.json parses, validated as FastAPI validates a body.
            return caller, self.validate(json.loads(body))
        except (ApiError, ValueError, ValidationError):  # JSONDecodeError is a ValueError
            return None


class _Invalid(ValueError):
    """A body the route's body field refuses (FastAPI's handler answers it)."""


def _valid(checked: tuple[Any, Any]) -> Any:
    """The value of a body field's ``validate`` answer; raises :class:`_Invalid` if it has
    errors."""
    value, errors = checked
    if errors:
        raise _Invalid(errors)
    return value


async def _body(receive: Receive) -> bytes | None:
    """The request's body, as ``Request.body`` reads it; None if the caller disconnected."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
