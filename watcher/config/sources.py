"""``[[sources]]``: the keys every source table shares, and the dispatch to its kind's model.

A payment processor or job queue is watched beside the chains (docs/sources.md)::

    [[sources]]
    name = "stripe"
    kind = "stripe_payment_intent"
    api_key = "${STRIPE_API_KEY}"          # polling; omit for webhooks only
    webhook_secret = "${STRIPE_WEBHOOK_SECRET}"

    [[sources]]
    name = "jobs"
    kind = "rq_job"
    redis_url = "redis://127.0.0.1:6379/0"

Everything below ``poll_interval_s``... belongs to one kind: its adapter declares a subclass
of :class:`SourceConfig` with those keys (its ``settings_model``, found through
:mod:`watcher.config.source_kinds`), and validating a table as a :class:`SourceConfig`
returns an instance of that subclass. A key of another kind is an error naming that kind,
so a typo'd table never silently watches nothing. A kind without a model (a plugin's)
reads its settings from ``options``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from pydantic import (
    BaseModel,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    field_validator,
    model_validator,
)

from watcher.config import source_kinds
from watcher.config.base import NAME, KeyedErrors, Loc, Strict
from watcher.config.errors import NestedErrors, UnknownKey

_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


class SourceConfig(Strict):
    """One ``[[sources]]`` table: the keys every kind has (a kind's model adds its own)."""

    name: str
    """Name used by the API (``"source"``) and stored as the settlement's chain: lower-case
    letters, digits, _ and -, at most 64 characters, distinct from every chain name."""
    kind: str
    """Settlement kind: ``stripe_payment_intent``, ``rq_job``, ``celery_task``, or a plugin's."""
    poll_interval_s: float = Field(default=2.0, gt=0, allow_inf_nan=False)
    """Seconds between two polls of this source's watched settlements."""
    timeout_s: float = Field(default=3600.0, gt=0, allow_inf_nan=False)
    """Settlement timeout used when a registration gives none."""
    max_wait_s: float = Field(default=86400.0, gt=0, allow_inf_nan=False)
    """Policy ceiling on any settlement's wait, whatever timeout a registration asks for."""
    late_watch_s: float = Field(default=86400.0, ge=0, allow_inf_nan=False)
    """How long a timed-out settlement is still watched, to report late finality."""
    options: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Settings of a kind that declares no settings model (a plugin's)."""

    if TYPE_CHECKING:
        # A kind's own keys live on its model (e.g. watcher.sources.rq_source.RqSettings);
        # code holding the common type reads them as plain objects and narrows them.
        def __getattr__(self, name: str) -> object: ...

    @classmethod
    def narrow(cls, config: SourceConfig) -> Self:
        """``config`` as this kind's model (a factory's argument is typed as the common one);
        TypeError if it was not validated as this kind."""
        if not isinstance(config, cls):
            raise TypeError(f"{config.kind} source {config.name!r} is not a {cls.__name__}")
        return config

    @classmethod
    def own_settings(cls) -> list[str]:
        """The keys this kind's model adds to the common ones."""
        return [name for name in cls.model_fields if name not in SourceConfig.model_fields]

    @model_validator(mode="wrap")
    @classmethod
    def _dispatch(cls, data: Any, handler: ModelWrapValidatorHandler[SourceConfig]) -> Any:
        """Validated as the common type, a table becomes an instance of its kind's model."""
        kind = data.get("kind") if cls is SourceConfig and isinstance(data, dict) else None
        if not isinstance(kind, str):
            return handler(data)
        try:
            model = kind_model(kind)
        except ImportError as exc:
            # Reported at the kind, not the table: a table's error echoes the table, secrets
            # from the environment included (api_key, webhook_secret).
            message = (
                f"kind {kind} cannot be loaded ({exc}): is the package that serves it "
                "installed (e.g. the finality-watcher extra of that name)?"
            )
            raise KeyedErrors([(("kind",), message)]) from None
        if model is None:
            return handler(data)
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise NestedErrors(model, exc, _explain_unknown(kind)) from None

    @field_validator("name")
    @classmethod
    def _check_source_name(cls, value: str) -> str:
        if not NAME.fullmatch(value) or len(value) > 64:
            raise ValueError(
                "must be 1..64 lower-case letters, digits, '_' and '-' (a chain name's rules)"
            )
        return value

    @field_validator("kind")
    @classmethod
    def _check_kind(cls, value: str) -> str:
        evm = source_kinds.EVM_KIND
        if value == evm:
            raise ValueError("evm_tx settlements are watched through [[chains]], not [[sources]]")
        kinds = [k for k in source_kinds.known_kinds() if k != evm]
        if value not in kinds:
            raise ValueError(f"unknown source kind {value!r}; known: {', '.join(kinds)}")
        return value

    @model_validator(mode="after")
    def _check_common(self) -> SourceConfig:
        problems: list[tuple[Loc, str]] = []
        if type(self) is not SourceConfig and self.options:
            problems.append((("options",), f"kind {self.kind} takes no options"))
        if self.timeout_s > self.max_wait_s:
            problems.append(
                (
                    ("timeout_s",),
                    f"must be <= max_wait_s ({self.max_wait_s}) (got {self.timeout_s})",
                )
            )
        if problems:
            raise KeyedErrors(problems)
        return self


def kind_model(kind: str) -> type[SourceConfig] | None:
    """The settings model ``kind``'s factory declares (its ``settings_model``); None for an
    unknown kind or one without a model. Imports the kind's adapter."""
    return _model_of(kind, source_kinds.load_factory(kind))


def _model_of(kind: str, factory: object) -> type[SourceConfig] | None:
    model = getattr(factory, "settings_model", None)
    if model is None:
        return None
    if not (isinstance(model, type) and issubclass(model, SourceConfig)):
        raise TypeError(f"source kind {kind!r}: settings_model is not a SourceConfig subclass")
    return model


def _explain_unknown(kind: str) -> UnknownKey:
    def explain(field: str, model: type[BaseModel]) -> str | None:
        for other, factory in source_kinds.builtin_factories(skip=kind):
            found = _model_of(other, factory)
            if found is not None and field in found.own_settings():
                return f"is a setting of kind {other}, not {kind}"
        return None

    return explain


def redis_url_problems(
    kind: str, values: dict[str, str | None], required: str
) -> list[tuple[Loc, str]]:
    """Problems of the Redis URLs of a job-queue kind: ``required`` must be set; each set
    one must be a redis://, rediss:// or unix:// URL."""
    problems: list[tuple[Loc, str]] = []
    for key, url in values.items():
        if url is None and key == required:
            problems.append(((key,), f"is required for kind {kind}"))
        elif url is not None and not url.startswith(_REDIS_SCHEMES):
            problems.append(((key,), "must be a redis://, rediss:// or unix:// URL"))
    return problems
