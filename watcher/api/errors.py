"""The API's one error shape: ``{"error": "FIELD: what is wrong", "fields": [FIELD], ...}``.

A route raises :class:`ApiError`; :func:`install` makes FastAPI answer it, request
validation errors, the framework's own errors (no route, a method the path does not take, a
body that is not JSON) and an unavailable store in that shape: nothing answers FastAPI's
``{"detail": ...}`` or a bare ``Internal Server Error``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import compile_path

from watcher.store.errors import StoreUnavailable


class ApiError(Exception):
    """An error answer: status, one-line message, optional extra fields."""

    def __init__(
        self, status: int, message: str, *, retry_after_s: float | None = None, **extra: Any
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after_s = retry_after_s
        """Sent as ``Retry-After`` (whole seconds, rounded up) when set: a 429's wait."""
        self.extra = extra


def named_fields(message: str) -> list[str]:
    """The field a ``"field: problem"`` message names, as ``fields`` lists it (every 4xx
    carries ``fields``, docs/api.md; an error raised without it names its field first)."""
    head, sep, _ = message.partition(": ")
    return [head] if sep and _FIELD.fullmatch(head) else []


_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


def error_response(status: int, message: str, **extra: Any) -> JSONResponse:
    """The error shape as a response (for routes that answer instead of raising); without
    ``fields``, the field the message starts with (:func:`named_fields`)."""
    fields = extra.pop("fields", None)
    if fields is None:
        fields = named_fields(message)
    return JSONResponse(
        {"error": printable(message), "fields": fields, **extra}, status_code=status
    )


def printable(message: str) -> str:
    """``message`` encodable as UTF-8: a lone surrogate quoted from the input is escaped
    (``\\udc00``), or the answer itself could not be sent."""
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


def field_of(loc: tuple[Any, ...]) -> str:
    """The field a pydantic error location names (``body``/``query``/``path`` dropped)."""
    parts = [str(p) for p in loc if p not in ("body", "query", "path")]
    return ".".join(parts) or "body"


def install(app: FastAPI) -> None:
    """Answer :class:`ApiError` and request validation errors in the error shape."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        response = error_response(exc.status, exc.message, **exc.extra)
        if exc.retry_after_s is not None:
            response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(validation_body(exc.errors()), status_code=422)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return framework_error(app, request, exc)

    @app.exception_handler(StoreUnavailable)
    async def _store_unavailable(_: Request, exc: StoreUnavailable) -> JSONResponse:
        # The reason is the store's own classified text (watcher/store/db.py): no URL, no
        # statement, no secret; the store's edge logs the failure itself, rate-limited.
        return error_response(503, f"store: unavailable: {exc.cause}", fields=[])

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        # The framework logs the traceback after this answer: a bug, to be fixed.
        return error_response(500, "internal error (logged by the daemon)", fields=[])


def framework_error(app: FastAPI, request: Request, exc: HTTPException) -> JSONResponse:
    """A framework error in the error shape: 404 naming the path, 405 with an ``Allow`` that
    lists every method the path takes (the framework names only the first route's), and a
    body that could not be parsed as a 422 naming ``body`` (the framework says 400)."""
    route = f"{request.method} {request.url.path}"
    if exc.status_code == 404:
        return error_response(404, f"path: no route {route}", fields=["path"])
    if exc.status_code == 405:
        allowed = sorted(documented_methods(app, request.url.path))
        response = error_response(
            405, f"method: {route} is not served; allowed: {', '.join(allowed)}", fields=[]
        )
        response.headers["Allow"] = ", ".join(allowed)
        return response
    if exc.status_code == 400 and isinstance(exc.__cause__, RecursionError | UnicodeError):
        why = "nested too deeply" if isinstance(exc.__cause__, RecursionError) else "not UTF-8"
        return error_response(422, f"body: not valid JSON ({why})", fields=["body"])
    response = error_response(exc.status_code, f"request: {exc.detail}", fields=[])
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value
    return response


def documented_methods(app: FastAPI, path: str) -> set[str]:
    """The methods ``/openapi.json`` documents for ``path``, from its most specific template
    (``/v1/settlements/batch`` is the batch route's, not ``{settlement_id}``'s)."""
    best = None
    methods: set[str] = set()
    for template, item in app.openapi().get("paths", {}).items():
        if not _template(template).match(path):
            continue
        params = template.count("{")
        if best is None or params < best:
            best, methods = params, set()
        if params == best:
            methods |= {m.upper() for m in item if m.upper() in _METHODS}
    return methods


@functools.lru_cache(maxsize=256)
def _template(template: str) -> re.Pattern[str]:
    """A path template's regex (compiled once)."""
    return compile_path(template)[0]


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"})


def validation_body(errors: Sequence[Any]) -> dict[str, Any]:
    """The 422 body of pydantic validation ``errors``: each field named, with its problem
    (shared by the request handler and the batch route, which answers per item)."""
    problems = [f"{_field(err)}: {_problem(err)}" for err in errors]
    fields = [_field(err) for err in errors]
    return {"error": printable("; ".join(problems)), "fields": [printable(f) for f in fields]}


def _field(err: Any) -> str:
    """The field one pydantic error is about (``body`` for a body that is not JSON)."""
    if err.get("type") == "json_invalid":
        return "body"
    return field_of(tuple(err.get("loc", ())))


def _problem(err: Any) -> str:
    """What is wrong, in one phrase."""
    if err.get("type") == "json_invalid":
        loc = tuple(err.get("loc", ()))
        where = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
        detail = (err.get("ctx") or {}).get("error", "")
        return f"not valid JSON{where}" + (f" ({detail})" if detail else "")
    return str(err.get("msg", "invalid")).removeprefix("Value error, ")
