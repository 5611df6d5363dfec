"""What a registration must look like before anything is stored: the chain body of
``POST /v1/settlements`` and the dependent-state checks chain and source bodies share."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from guard.canonical import CanonicalError, canonical_json
from guard.errors import InvalidHash
from guard.hexes import parse_tx_hash
from watcher.api.errors import ApiError

MAX_DEPENDENT_STATE_BYTES = 64 * 1024
"""Default largest ``dependent_state``; the limit applied is ``[delivery]
max_dependent_state_bytes``."""


class SettlementRequest(BaseModel):
    """Body of ``POST /v1/settlements``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    chain: str = Field(description="Configured chain name, e.g. 'local'.")
    tx_hash: str = Field(description="0x + 64 hex digits.")
    confirmations: int | None = Field(
        default=None, ge=1, description="Depth N; chain default if omitted."
    )
    timeout_s: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="Seconds until treated as failed."
    )
    dependent_state: dict[str, Any] | None = Field(
        default=None, description="State to commit on finality."
    )
    commit_url: str | None = Field(
        default=None, description="Where commit/discard events are POSTed."
    )
    provisional: bool = Field(
        default=False,
        description="Also POST inclusion and depth updates before finality, each marked "
        "provisional (for state that can be reversed).",
    )
    sender: str | None = Field(
        default=None, description="The tx's sender (with nonce): no lookup by hash."
    )
    nonce: int | None = Field(default=None, description="The tx's nonce (with sender).")
    raw_tx: str | None = Field(
        default=None, description="The signed tx (0x hex), checked against tx_hash."
    )

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
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value


def check_dependent_state(state: object, limit: int) -> None:
    """Refuse dependent state that is not a JSON object, has NaN or Infinity, is over
    ``limit`` bytes (413, with the limit), or has no canonical JSON form (a float: its
    digest is signed into the binding receipt); raises :class:`ApiError`."""
    if not isinstance(state, dict):
        raise ApiError(422, "dependent_state: must be a JSON object", fields=["dependent_state"])
    try:
        encoded = json.dumps(state, separators=(",", ":"), allow_nan=False)
    except ValueError:
        raise ApiError(
            422, "dependent_state: must be JSON without NaN or Infinity", fields=["dependent_state"]
        ) from None
    size = len(encoded.encode())
    if size > limit:
        raise ApiError(
            413, f"dependent_state: {size} bytes is over the limit of {limit} bytes", limit=limit
        )
    try:
        canonical_json(state)
    except CanonicalError as exc:
        message = str(exc).replace("$", "dependent_state", 1)
        raise ApiError(422, message, fields=["dependent_state"]) from None
