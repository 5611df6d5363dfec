"""The bodies of the ``/v1/workflows`` routes (pydantic only: the API validates with them,
``/openapi.json`` documents them, callers may build them).

Every body refuses unknown keys and wrong types (strict): a typo is a 422 naming the
field, never a silently ignored option.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from watcher.api.models.limits import lone_surrogate
from watcher.api.models.params import MAX_ID

MAX_STEPS = 100
"""Most steps in one workflow."""
MAX_LEASE_S = 86_400.0
"""Longest lease (a day): a holder that needs more renews."""
STEP_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
"""A step's name: a word of up to 64 characters (it appears in paths)."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("*", mode="before")
    @classmethod
    def _storable(cls, value: Any, info: ValidationInfo) -> Any:
        if lone_surrogate(value):
            raise ValueError("holds a lone surrogate (not UTF-8)")
        if info.field_name == "fencing_token" and isinstance(value, float) and value.is_integer():
            return int(value)  # JSON has one number type: 2.0 is the integer 2 (not "2")
        return value


class WorkflowCreate(_Body):
    """Body of ``POST /v1/workflows``."""

    steps: list[Annotated[str, Field(pattern=STEP_NAME)]] = Field(
        min_length=1,
        max_length=MAX_STEPS,
        description="Step names, in order (each once).",
        json_schema_extra={"uniqueItems": True},
    )
    holder: str = Field(min_length=1, max_length=128, description="Who takes the lock (an agent).")
    lease_s: float = Field(gt=0, le=MAX_LEASE_S, allow_inf_nan=False, description="Lease length.")
    idempotent_steps: list[str] = Field(
        default_factory=list, description="Steps whose re-run has no extra effect."
    )
    reference: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="Idempotency reference (an order id): the same again answers the same "
        "workflow (200).",
    )

    @field_validator("steps")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("a step name is listed twice")
        return value

    @field_validator("idempotent_steps")
    @classmethod
    def _idempotent_known(cls, value: list[str], info: ValidationInfo) -> list[str]:
        unknown = sorted(set(value) - set(info.data.get("steps") or ()))
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not one of the steps")
        return value


class Recovery(_Body):
    """How a step's real state is learned: a settlement the watcher follows, or an
    idempotency key under which the step can be re-run."""

    settlement_id: str | None = Field(default=None, min_length=1, max_length=64)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=255)

    @model_validator(mode="after")
    def _one(self) -> Recovery:
        if (self.settlement_id is None) == (self.idempotency_key is None):
            raise ValueError("give exactly one of settlement_id and idempotency_key")
        return self

    def as_json(self) -> dict[str, str]:
        """The recovery as stored."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class StepBegin(_Body):
    """Body of ``POST /v1/workflows/{id}/steps/{step}/begin``."""

    fencing_token: int = Field(ge=1, le=MAX_ID, description="The lock's current fencing token.")
    operation: str = Field(min_length=1, max_length=1000, description="What the step does.")
    recovery: Recovery | None = None


class StepComplete(_Body):
    """Body of ``POST /v1/workflows/{id}/steps/{step}/complete``."""

    fencing_token: int = Field(ge=1, le=MAX_ID)
    side_effects: dict[str, Any] | None = Field(
        default=None, description="What the step committed (JSON, bounded like dependent_state)."
    )


class Fenced(_Body):
    """Body of ``POST /v1/workflows/{id}/lease`` and ``/release``."""

    fencing_token: int = Field(ge=1, le=MAX_ID)


class TakeOver(_Body):
    """Body of ``POST /v1/workflows/{id}/takeover``."""

    holder: str = Field(min_length=1, max_length=128)
    lease_s: float = Field(gt=0, le=MAX_LEASE_S, allow_inf_nan=False)
