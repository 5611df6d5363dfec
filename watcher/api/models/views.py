"""Answers of the read routes besides settlements: a tx by hash, chains, events, reorgs,
deliveries. Every key today's answers carry is declared; ``extra="allow"`` keeps a newer
daemon's additional keys readable."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from watcher.api.models.settlements import Verdict


class TxView(BaseModel):
    """``GET /v1/chains/{chain}/txs/{tx_hash}``: the registered settlement's view, or a live
    answer from the node for an unregistered hash (``registered`` false, no id)."""

    model_config = ConfigDict(extra="allow")

    settlement_id: str | None
    registered: bool
    chain: str
    tx_hash: str
    verdict: Verdict
    directive: str | None = None
    block_number: int | None = None
    block_hash: str | None = None
    status: int | None = None
    confirmations: int | None = None
    required_confirmations: int | None = None
    finality_mode: str | None = None
    head_number: int | None = None
    reorg_count: int = 0
    replaced_by: str | None = None
    digest: str | None = None
    evidence: Any = None
    receipt: dict[str, Any] | None = None
    live_check: str | None = Field(
        default=None,
        description="'timed_out' when the node did not answer within [api] "
        "live_lookup_timeout_s: the answer is what the store knows (no settlement, the "
        "recorded head); absent otherwise.",
    )


class ChainView(BaseModel):
    """One chain of ``GET /v1/chains``."""

    model_config = ConfigDict(extra="allow")

    name: str
    chain_id: int | None = None
    confirmations: int
    finality: str
    poll_interval_s: float
    head_number: int | None = None
    head_hash: str | None = None
    finalized_number: int | None = None
    finalized_followed: bool = Field(
        description="Whether the chain's finality rule reads the node's finalized tag."
    )
    safe_followed: bool = Field(
        description="Whether the chain's finality rule reads the node's safe tag."
    )
    safe_number: int | None = Field(
        default=None,
        description="The safe tag's height as this instance last read it (only when "
        "safe_followed).",
    )
    block_time_s: float | None = Field(
        default=None, description="The registry's block time of the chain (unknown: absent)."
    )
    healthy: bool
    lagging: bool
    last_error: str | None = None
    watched: int
    rpc: list[dict[str, Any]] = Field(description="Endpoints (credentials redacted).")
    rpc_calls: dict[str, int]
    beacon_api: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Beacon API endpoints (credentials redacted) with their health: finality "
        "receipts carry the consensus section they serve (docs/receipts.md).",
    )
    budget: dict[str, Any] | None = None
    heads: dict[str, Any]


class EventView(BaseModel):
    """One event of ``GET /v1/events`` (and the ``data:`` of its SSE frames)."""

    model_config = ConfigDict(extra="allow")

    id: int
    chain: str | None = None
    settlement_id: str | None = None
    kind: str
    severity: str
    payload: dict[str, Any] | None = None
    created_at: int


class BlockRef(BaseModel):
    """A block by number and hash."""

    number: int | None = None
    hash: str | None = None


class ReorgView(BaseModel):
    """One reorg of ``GET /v1/reorgs``."""

    model_config = ConfigDict(extra="allow")

    id: int
    chain: str
    detected_at: int
    depth: int
    common_ancestor: BlockRef
    old_head: BlockRef
    new_head: BlockRef
    replaced: list[dict[str, Any]]
    touched: list[str]
    finality_violation: bool


class DeliveryView(BaseModel):
    """One outbox row of ``GET /v1/deliveries`` (``body`` only from ``…/{id}``)."""

    model_config = ConfigDict(extra="allow")

    id: int
    settlement_id: str | None = None
    event_id: int | None = None
    channel: str
    kind: str
    url: str | None = None
    idempotency_key: str
    state: str
    attempts: int
    next_attempt_at: int | None = None
    last_status: int | None = None
    last_error: str | None = None
    created_at: int
    updated_at: int
    delivered_at: int | None = None
    body: Any = None


class ReceiptRecordView(BaseModel):
    """One receipt of ``GET /v1/settlements/{id}/receipts`` (revocations included)."""

    model_config = ConfigDict(extra="allow")

    id: int
    kind: str
    digest: str
    signer: str
    created_at: int
    revokes: int | None = None
    revoked_by: int | None = None
    receipt: dict[str, Any] = Field(description="The signed document, as GET …/receipt serves it.")


class SignerView(BaseModel):
    """One signing address of ``GET /v1/signers``."""

    model_config = ConfigDict(extra="allow")

    address: str
    source: str | None = None
    first_used_at: int | None = None
    retired_at: int | None = None
    current: bool


class ChainHealthView(BaseModel):
    """One chain in ``GET /healthz``."""

    model_config = ConfigDict(extra="allow")

    healthy: bool
    last_error: str | None = None
    head_number: int | None = None
    endpoints_unused: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Endpoints of a chain read through several that are not used now, with "
        "their state ('inconsistent': their data failed a check; 'open', 'stalled', ...) and "
        "why; the chain may still be healthy on the others.",
    )
    beacon_api_unused: list[dict[str, Any]] | None = Field(
        default=None,
        description="Only for a chain with [[chains]] beacon_api: its Beacon API endpoints not "
        "in use now (a single one too), each with its state ('open', 'half_open': the next "
        "request tries it again) and why.",
    )
    receipts_waiting: str | None = Field(
        default=None,
        description="Set when every Beacon API endpoint of the chain is down: its finality "
        "receipts wait for Ethereum consensus (verdicts go on); says the last error and what "
        "to do. Makes /healthz 503.",
    )


class HealthView(BaseModel):
    """``GET /healthz`` (the same body with 200 healthy and 503 not)."""

    model_config = ConfigDict(extra="allow")

    ok: bool
    chains: dict[str, ChainHealthView]
    store_error: str | None = None
    handoff_blocked: dict[str, str] | None = Field(
        default=None,
        description="Leases this instance cannot take over, and what the operator must do "
        "(the lapsed owner's database sessions hold them); absent when none",
    )
