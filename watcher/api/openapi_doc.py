"""The error answers in ``/openapi.json``: every operation documents the one error shape.

FastAPI documents its own ``{"detail": …}`` body for 422 and nothing for the errors a route
raises itself; this rewrites the generated document once: 422 (anything parsed), 404 (a path
that names something) and 503 (store unavailable) answer ``ErrorBody``, and
``HTTPValidationError`` is gone. A route's own documented errors are kept.

Security: ``bearer`` (HTTP bearer) is always a scheme; with ``[[api.tokens]]`` configured
every operation that takes a token lists it with the scope it needs (OpenAPI 3.1 role
names) and documents 401 and 403; without tokens no operation requires one (the document
says what this daemon does). Every POST documents 415 (JSON only), and one that takes no
fields documents ``{}`` as its body.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts

from watcher.api.auth import Callers, Require
from watcher.api.guards import MUTATING
from watcher.api.models.errors import ErrorBody

_REF = {"$ref": "#/components/schemas/ErrorBody"}
_DESCRIPTIONS = {
    404: "Not found",
    413: "The body is over the route's limit (named in limit)",
    422: "A field is invalid (named in fields)",
    503: "Unavailable",
}


def install_openapi(app: FastAPI) -> None:
    """Serve the rewritten document at ``/openapi.json`` (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            callers = getattr(app.state, "callers", None)
            required = isinstance(callers, Callers) and not callers.open
            app.openapi_schema = with_security(with_errors(doc), route_scopes(app), required)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def with_errors(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with the error shape documented on every operation."""
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas["ErrorBody"] = ErrorBody.model_json_schema()
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    for path, item in doc.get("paths", {}).items():
        for operation in item.values():
            responses = operation.setdefault("responses", {})
            parsed = bool(operation.get("parameters")) or "requestBody" in operation
            body = "requestBody" in operation  # capped before parsing (api/body_limit.py)
            wanted = [503, *([404] if "{" in path else []), *([422] if parsed else [])]
            wanted += [413] if body else []
            if "422" in responses and "HTTPValidationError" in str(responses["422"]):
                del responses["422"]
            for status in wanted:
                responses.setdefault(
                    str(status),
                    {
                        "description": _DESCRIPTIONS[status],
                        "content": {"application/json": {"schema": _REF}},
                    },
                )
    return doc


def route_scopes(app: FastAPI) -> dict[tuple[str, str], str]:
    """``(path, method)`` → the scope its :class:`~watcher.api.auth.Require` asks for."""
    out: dict[tuple[str, str], str] = {}
    # FastAPI keeps an included router's routes behind it; this walks to the originals.
    for route in (context.original_route for context in iter_route_contexts(app.routes)):
        if not isinstance(route, APIRoute):
            continue
        for dependency in route.dependant.dependencies:
            if isinstance(dependency.call, Require):
                for method in route.methods or ():
                    out[(route.path_format, method.lower())] = dependency.call.scope
    return out


def with_security(
    doc: dict[str, Any], scopes: dict[tuple[str, str], str], required: bool
) -> dict[str, Any]:
    """``doc`` with the bearer scheme, each guarded operation's scope when tokens are
    ``required``, and 415 on every POST (and DELETE)."""
    components = doc.setdefault("components", {})
    components["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "A token of [[api.tokens]]; scopes: read, register, admin.",
        }
    }
    for path, item in doc.get("paths", {}).items():
        for method, operation in item.items():
            responses = operation.setdefault("responses", {})
            if method.upper() in MUTATING:  # POST, DELETE...: JSON only (api/guards.py)
                responses.setdefault("415", _error("Not application/json"))
                operation.setdefault("requestBody", _EMPTY_BODY)
            scope = scopes.get((path, method))
            if scope is None or not required:
                continue
            operation["security"] = [{"bearer": [scope]}]
            responses.setdefault("401", _error("No valid Bearer token"))
            responses.setdefault("403", _error(f"The token lacks the {scope} scope"))
    return doc


_EMPTY_BODY = {
    "required": True,
    "description": "Nothing to send: {} (a POST is JSON or refused, so a form cannot post it).",
    "content": {"application/json": {"schema": {"type": "object"}}},
}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _REF}}}
