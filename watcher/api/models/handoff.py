"""Answers of the handoff routes: takeovers between instances and the current leases.

Documentation models (the routes answer their dicts as they are); every key is declared,
extra keys allowed."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class HandoffView(BaseModel):
    """One takeover of ``GET /v1/handoffs`` (``elements``/``receipts`` with ``full`` and
    from ``GET /v1/handoffs/{id}``)."""

    model_config = ConfigDict(extra="allow")

    id: int
    name: str = Field(description="The chain or source handed over.")
    from_owner: str | None = None
    from_token: int | None = None
    to_owner: str
    to_token: int
    reason: str | None = None
    verdict: str
    at: int
    recovery: Any = None
    signed: bool = Field(description="Every recorded element has its signed receipt.")
    elements: dict[str, Any] | None = None
    receipts: dict[str, dict[str, Any] | None] | None = None


class LeasesView(BaseModel):
    """``GET /v1/leases``: leases, live instances, this instance's share, refused writes."""

    model_config = ConfigDict(extra="allow")

    instance_id: str
    enabled: bool
    balance: Any = None
    fair_share: int | None = None
    leases: list[dict[str, Any]]
    instances: list[dict[str, Any]]
    refused_writes: Any = None
