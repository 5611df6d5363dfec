"""The bodies of ``/v1/subscriptions`` (standing address watches) and ``/v1/invoices``.

Shared by the API (validation and ``/openapi.json``) and callers (``watcher.client``):
pydantic only. Addresses in lower case or EIP-55 (a wrong checksum is refused as a typo);
amounts are decimal strings of base units.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from guard.payment import NATIVE, InvalidPaymentField, parse_payment_address
from watcher.api.models.limits import MAX_DEPTH, MAX_KEYS, storable
from watcher.api.models.payments import MAX_REFERENCE, checked_amount
from watcher.api.models.settlements import MIN_TIMEOUT_S, checked_commit_url

MAX_ADDRESSES = 10_000
"""Most addresses one request adds to a subscription."""

MAX_ASSETS = 32
"""Most assets one subscription watches."""


def _address(value: str, field: str) -> str:
    try:
        return parse_payment_address(value, field)
    except InvalidPaymentField as exc:
        raise ValueError(str(exc)) from None


def _asset(value: str, field: str) -> str:
    if value == NATIVE:
        return value
    try:
        return parse_payment_address(value, field)
    except InvalidPaymentField as exc:
        raise ValueError(f"must be 'native' or a token contract: {exc}") from None


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    @field_validator("*", mode="before")
    @classmethod
    def _storable(cls, value: Any, info: ValidationInfo) -> Any:
        return storable(value, info.field_name)

    @field_validator("commit_url", check_fields=False)
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return checked_commit_url(value)


class AddressesRequest(_Body):
    """Body of ``POST /v1/subscriptions/{id}/addresses``: more addresses to watch."""

    addresses: list[str] = Field(min_length=1, max_length=MAX_ADDRESSES)

    @field_validator("addresses")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(_address(a, f"addresses[{i}]") for i, a in enumerate(value)))


class SubscriptionRequest(AddressesRequest):
    """Body of ``POST /v1/subscriptions``: watch ``addresses`` for transfers of ``assets``;
    each transfer becomes a deposit (``evm_deposit``)."""

    chain: str = Field(description="Configured chain name.")
    assets: list[str] = Field(
        min_length=1,
        max_length=MAX_ASSETS,
        description="'native' and/or ERC-20 token contracts (0x).",
    )
    confirmations: int | None = Field(default=None, ge=1, description="Depth N of deposits.")
    commit_url: str | None = Field(
        default=None,
        description="Each deposit's commit is delivered here once, on finality.",
        json_schema_extra={"pattern": "^https?://"},
    )
    reference: str | None = Field(default=None, min_length=1, max_length=MAX_REFERENCE)

    @field_validator("assets")
    @classmethod
    def _assets(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(_asset(a, f"assets[{i}]") for i, a in enumerate(value)))


class InvoiceRequest(_Body):
    """Body of ``POST /v1/invoices``: an invoice paid at a fresh address."""

    chain: str = Field(description="Configured chain name.")
    asset: str = Field(description="'native' or the ERC-20 token contract (0x address).")
    amount: str = Field(description="Base units as a decimal string, > 0.")
    expires_in_s: float = Field(ge=MIN_TIMEOUT_S, allow_inf_nan=False)
    reference: str | None = Field(default=None, min_length=1, max_length=MAX_REFERENCE)
    dependent_state: dict[str, Any] | None = Field(
        default=None,
        description=f"State to commit once settled (at most {MAX_DEPTH} deep, {MAX_KEYS} keys).",
    )
    commit_url: str | None = Field(default=None, json_schema_extra={"pattern": "^https?://"})

    @field_validator("asset")
    @classmethod
    def _the_asset(cls, value: str) -> str:
        return _asset(value, "asset")

    @field_validator("amount")
    @classmethod
    def _amount(cls, value: str) -> str:
        return checked_amount(value)
