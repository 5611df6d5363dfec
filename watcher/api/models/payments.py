"""The body of ``POST /v1/settlements`` for a payment to an address (``kind`` ``evm_payment``).

Shared by the API (validation and ``/openapi.json``) and callers (``watcher.client``):
pydantic only. Addresses are accepted in lower case or EIP-55 (a mixed-case address with a
wrong checksum is a typo, refused); ``amount`` is a decimal string of base units > 0 (a JSON
number would lose precision above 2**53).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from guard.payment import NATIVE, InvalidPaymentField, parse_amount, parse_payment_address
from watcher.api.models.limits import MAX_DEPTH, MAX_KEYS, storable
from watcher.api.models.settlements import MIN_TIMEOUT_S, checked_commit_url

MAX_REFERENCE = 128
"""Longest idempotency ``reference``."""


def checked_amount(value: str) -> str:
    """An amount in base units as its canonical decimal string; a ``ValueError`` saying why
    it is not one (the field's name is pydantic's to add)."""
    try:
        return str(parse_amount(value))
    except InvalidPaymentField as exc:
        raise ValueError(str(exc).split(": ", 1)[1]) from None


class PaymentRequest(BaseModel):
    """Body of ``POST /v1/settlements`` for a payment to an address."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    kind: Literal["evm_payment"] = Field(description="evm_payment")
    chain: str = Field(description="Configured chain name.")
    to: str = Field(description="Receiving address (0x, lower case or EIP-55).")
    asset: str = Field(description="'native' or the ERC-20 token contract (0x address).")
    amount: str = Field(description="Base units (wei, token units) as a decimal string, > 0.")
    sender: str | None = Field(
        default=None, alias="from", description="Count only transfers from this address."
    )
    reference: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_REFERENCE,
        description="Idempotency key (an order id): a repeat with the same reference returns "
        "the same payment (200); without one every registration is a new payment.",
    )
    confirmations: int | None = Field(default=None, ge=1, description="Depth N.")
    timeout_s: float | None = Field(default=None, ge=MIN_TIMEOUT_S, allow_inf_nan=False)
    dependent_state: dict[str, Any] | None = Field(
        default=None,
        description=f"State to commit once paid finally (at most {MAX_DEPTH} deep, "
        f"{MAX_KEYS} keys).",
    )
    commit_url: str | None = Field(default=None, json_schema_extra={"pattern": "^https?://"})

    @field_validator("*", mode="before")
    @classmethod
    def _storable(cls, value: Any, info: ValidationInfo) -> Any:
        return storable(value, info.field_name)

    @field_validator("to", "sender")
    @classmethod
    def _address(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        try:
            return parse_payment_address(value, str(info.field_name))
        except InvalidPaymentField as exc:
            raise ValueError(str(exc).split(": ", 1)[1]) from None

    @field_validator("asset")
    @classmethod
    def _asset(cls, value: str) -> str:
        if value == NATIVE:
            return value
        try:
            return parse_payment_address(value, "asset")
        except InvalidPaymentField as exc:
            raise ValueError(f"must be 'native' or a token contract: {exc}") from None

    @field_validator("amount")
    @classmethod
    def _amount(cls, value: str) -> str:
        return checked_amount(value)

    @field_validator("commit_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return checked_commit_url(value)
