"""Settlement bodies and answers: registration (one and a batch), the view, the listing page.

Shared by the API (validation and ``/openapi.json``) and by callers (``watcher.client``):
pydantic only. The views declare every key today's answers carry; ``extra="allow"`` keeps
a newer daemon's additional keys readable by an older client.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from guard.errors import InvalidHash
from guard.hexes import parse_tx_hash
from watcher.api.models.limits import MAX_DEPTH, MAX_KEYS, storable
from watcher.api.models.params import MAX_ID
from watcher.destinations import url_text_problem

MAX_BATCH = 1000
"""Most registrations one ``POST /v1/settlements/batch`` takes."""

MAX_PAGE = 500
"""Largest ``limit`` of ``GET /v1/settlements``."""

MIN_TIMEOUT_S = 1.0
"""Shortest ``timeout_s``: a deadline in whole milliseconds far from zero (1e-300 or
0.0004 s rounded to 0 ms and the guard refused the policy: a 500)."""

TX_HASH = "^0x[0-9a-fA-F]{64}$"
"""What a tx hash looks like (documented; the check is guard.hexes.parse_tx_hash)."""

Verdict = Literal[
    "NO_SETTLEMENT",
    "AWAITING_FINALITY",
    "FINALITY_CONFIRMED",
    "SETTLEMENT_FAILED",
    "TIMEOUT_TREATED_AS_FAILURE",
]


def checked_commit_url(value: str | None) -> str | None:
    """A ``commit_url`` as written, if it can be sent to (scheme, length, no control
    characters); a ``ValueError`` saying why not. Every body with a commit URL checks it so."""
    problem = None if value is None else url_text_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


class SettlementRequest(BaseModel):
    """Body of ``POST /v1/settlements`` for a chain transaction (``kind`` ``evm_tx``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    chain: str = Field(description="Configured chain name, e.g. 'local'.")
    tx_hash: str = Field(description="0x + 64 hex digits.", json_schema_extra={"pattern": TX_HASH})
    confirmations: int | None = Field(
        default=None, ge=1, description="Depth N; chain default if omitted."
    )
    timeout_s: float | None = Field(
        default=None,
        ge=MIN_TIMEOUT_S,
        allow_inf_nan=False,
        description="Seconds until treated as failed (at least 1; capped at the chain's max wait).",
    )
    dependent_state: dict[str, Any] | None = Field(
        default=None,
        description=f"State to commit on finality (at most {MAX_DEPTH} objects and arrays "
        f"deep, {MAX_KEYS} keys in all, and [delivery] max_dependent_state_bytes).",
    )
    commit_url: str | None = Field(
        default=None,
        description="Where commit/discard events are POSTed.",
        json_schema_extra={"pattern": "^https?://"},
    )
    provisional: bool = Field(
        default=False,
        description="Also POST inclusion and depth updates before finality, each marked "
        "provisional (for state that can be reversed).",
    )
    sender: str | None = Field(
        default=None, description="The tx's sender (with nonce): no lookup by hash."
    )
    nonce: int | None = Field(
        default=None, ge=0, le=MAX_ID, description="The tx's nonce (with sender)."
    )
    raw_tx: str | None = Field(
        default=None, description="The signed tx (0x hex), checked against tx_hash."
    )

    @field_validator("*", mode="before")
    @classmethod
    def _storable(cls, value: Any, info: ValidationInfo) -> Any:
        """Every string storable as UTF-8; ``dependent_state`` within its depth and keys."""
        return storable(value, info.field_name)

    @field_validator("tx_hash")
    @classmethod
    def _check_hash(cls, value: str) -> str:
        try:
            return str(parse_tx_hash(value))
        except InvalidHash as exc:
            raise ValueError(str(exc).removeprefix("tx_hash: ")) from None

    @field_validator("commit_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return checked_commit_url(value)


class SourceSettlementRequest(BaseModel):
    """Body of ``POST /v1/settlements`` for an off-chain source (docs/sources.md)."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(description="A source kind: stripe_payment_intent, rq_job, celery_task…")
    ref: str = Field(description="The payment intent / job / task id.")
    source: str | None = Field(
        default=None, description="Configured source name; optional if only one has this kind."
    )
    timeout_s: float | None = Field(default=None, ge=MIN_TIMEOUT_S)
    dependent_state: dict[str, Any] | None = None
    commit_url: str | None = None


class SettlementView(BaseModel):
    """A registered settlement as the API shows it (chain and source kinds share it)."""

    model_config = ConfigDict(extra="allow")

    settlement_id: str
    registered: bool
    chain: str = Field(description="Chain name (a source's name for a source settlement).")
    tx_hash: str | None = Field(
        description="The tx hash (a source's ref for a source settlement; null for a payment "
        "to an address, whose transfers are in 'transfers')."
    )
    verdict: Verdict
    directive: str | None = Field(
        default=None,
        description="What to do now and why, computed when answering (time elapsed and left).",
    )
    waiting_for: str | None = Field(
        default=None,
        description="What the finality rule still waits for, in words (null once terminal): "
        "'inclusion in a block', 'depth 8; now 3', or 'the finalized block to reach 812; "
        "finalized now 760'.",
    )
    block_number: int | None = None
    block_hash: str | None = None
    status: int | None = Field(default=None, description="Receipt status: 1 success, 0 revert.")
    confirmations: int | None = None
    required_confirmations: int | None = None
    finality_mode: str
    head_number: int | None = None
    reorg_count: int
    replaced_by: str | None = None
    initiated_at: int = Field(description="Unix milliseconds.")
    deadline: int = Field(description="Unix milliseconds.")
    terminal_at: int | None = None
    digest: str
    evidence: Any = None
    receipt: dict[str, Any] | None = Field(
        default=None, description="The signed receipt (or the unsigned decision until signed)."
    )
    receipt_signed: bool
    binding: dict[str, Any] | None = None
    dependent_state: dict[str, Any] | None = None
    commit_url: str | None = None
    kind: str | None = Field(default=None, description="Source settlements only.")
    source: str | None = Field(default=None, description="Source settlements only.")
    ref: str | None = Field(default=None, description="Source settlements only.")


class SettlementPage(BaseModel):
    """One page of ``GET /v1/settlements``, oldest registration first."""

    items: list[SettlementView]
    next_cursor: str | None = Field(
        description="Pass as ?cursor= for the next page; null on the last page."
    )


class BatchRequest(BaseModel):
    """Body of ``POST /v1/settlements/batch``: each item is a ``POST /v1/settlements`` body."""

    model_config = ConfigDict(extra="forbid")

    items: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_BATCH)


class BatchItemResult(BaseModel):
    """What became of one item: ``status`` 201 (registered), 200 (already registered,
    same id) or the 4xx it would have got alone, with ``error`` and ``fields``."""

    index: int
    status: int
    settlement: SettlementView | None = None
    error: str | None = None
    fields: list[str] = Field(default_factory=list)


class BatchResponse(BaseModel):
    """One result per item, in the order of the request."""

    results: list[BatchItemResult]
