"""The API's one error shape: ``{"error": "FIELD: what is wrong", "fields": [FIELD], ...}``.

A route raises :class:`ApiError`; :func:`install` makes FastAPI answer it, and request
validation errors, in that shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse


class ApiError(Exception):
    """An error answer: status, one-line message, optional extra fields."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


def error_response(status: int, message: str, **extra: Any) -> JSONResponse:
    """The error shape as a response (for routes that answer instead of raising)."""
    return JSONResponse({"error": message, **extra}, status_code=status)


def field_of(loc: tuple[Any, ...]) -> str:
    """The field a pydantic error location names (``body``/``query``/``path`` dropped)."""
    parts = [str(p) for p in loc if p not in ("body", "query", "path")]
    return ".".join(parts) or "body"


def install(app: FastAPI) -> None:
    """Answer :class:`ApiError` and request validation errors in the error shape."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.message, **exc.extra)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(validation_body(exc.errors()), status_code=422)


def validation_body(errors: Sequence[Any]) -> dict[str, Any]:
    """The 422 body of pydantic validation ``errors``: each field named, with its problem
    (shared by the request handler and the batch route, which answers per item)."""
    problems = [
        f"{field_of(tuple(err.get('loc', ())))}: "
        f"{str(err.get('msg', 'invalid')).removeprefix('Value error, ')}"
        for err in errors
    ]
    fields = [field_of(tuple(err.get("loc", ()))) for err in errors]
    return {"error": "; ".join(problems), "fields": fields}
