"""The error body every 4xx answer of the API carries (see ``watcher.api.errors``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ErrorBody(BaseModel):
    """``{"error": "FIELD: what is wrong", "fields": [FIELD], ...}``; some errors add
    context (``known_chains``, ``limit``, ``verdict``, ``pending``)."""

    model_config = ConfigDict(extra="allow")

    error: str = Field(description="One line naming the field and the problem.")
    fields: list[str] = Field(
        default_factory=list, description="The request fields the error is about."
    )


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "Bad request"},
    404: {"model": ErrorBody, "description": "Not found"},
    409: {"model": ErrorBody, "description": "Conflict"},
    413: {"model": ErrorBody, "description": "Too large"},
    422: {"model": ErrorBody, "description": "A field is invalid (named in fields)"},
    429: {
        "model": ErrorBody,
        "description": "A rate limit of this caller (Retry-After: seconds until it fits)",
    },
    503: {"model": ErrorBody, "description": "Store or chain unavailable"},
}
"""The documented error answers, keyed by status (FastAPI ``responses=``)."""
