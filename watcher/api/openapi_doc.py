"""The error answers in ``/openapi.json``: every operation documents the one error shape.

FastAPI documents its own ``{"detail": …}`` body for 422 and nothing for the errors a route
raises itself; this rewrites the generated document once: 422 (anything parsed), 404 (a path
that names something) and 503 (store unavailable) answer ``ErrorBody``, and
``HTTPValidationError`` is gone. A route's own documented errors are kept.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from watcher.api.models.errors import ErrorBody

_REF = {"$ref": "#/components/schemas/ErrorBody"}
_DESCRIPTIONS = {404: "Not found", 422: "A field is invalid (named in fields)", 503: "Unavailable"}


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
            app.openapi_schema = with_errors(doc)
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
            wanted = [503, *([404] if "{" in path else []), *([422] if parsed else [])]
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
