"""The daemon's configuration: a TOML file, validated before anything starts.

A config file says where state is stored (``[store]``), where the HTTP API listens
(``[api]``) and which chains are watched (one ``[[chains]]`` table each)::

    [store]
    url = "sqlite:///finality.db"

    [api]
    listen = "127.0.0.1:8710"

    [[chains]]
    name = "ethereum"
    chain_id = 1
    rpc = ["${ETH_RPC_URL}"]      # confirmations, finality, poll_interval_s: from the registry

Rules, so a mistake is an error at start-up and never a silent default:

- Unknown keys are errors (``confirmation = 3`` is reported, with the likely intended key).
- Types are strict: ``confirmations = "3"`` or ``= true`` is an error; an integer is accepted
  where seconds are expected. ``inf`` and ``nan`` are refused everywhere.
- Environment: every ``${NAME}`` inside a string value is replaced by ``os.environ[NAME]``
  (the whole string or a part of it; there is no escape for a literal ``${``). An unset
  variable is an error naming the key and the variable. Error messages show the
  ``${NAME}`` template, not the secret it expanded to.
- Keys a chain may omit are filled from :mod:`chains.registry` by ``chain_id``:
  ``confirmations``, ``finality``, ``poll_interval_s``, then ``header_window``. After
  validation those four fields are never ``None``; read them through the typed properties
  ``resolved_confirmations``, ``resolved_finality``, ``resolved_poll_interval_s`` and
  ``resolved_header_window`` (mypy sees the fields as optional, the properties are not).
- A relative SQLite path is relative to the daemon's current working directory, not to the
  config file (``sqlite:///finality.db``); write ``sqlite:////abs/path.db`` for an absolute one.

Errors::

    ConfigError(Exception)          the file is missing, unreadable, not TOML, or invalid;
                                    one line per problem: "FILE: KEY: what is wrong"
    UnknownChainName(LookupError)   Config.chain(name) for a name that is not configured
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast, get_args
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from chains.finality_modes import FINALITY_MODES, L2_RISK, NEEDS_FINALIZED, NEEDS_SAFE
from chains.registry import known_chain

FinalityMode = Literal["depth", "finalized", "depth_or_finalized", "safe", "depth_and_finalized"]
"""How a chain's blocks become final: depth >= N, the node's ``finalized`` tag, either of
the two, the node's ``safe`` tag, or both depth and ``finalized`` (chains.finality_modes)."""

_FINALITY_MODES: tuple[FinalityMode, ...] = get_args(FinalityMode)
if _FINALITY_MODES != FINALITY_MODES:  # one list of names: chains.finality_modes
    raise RuntimeError(f"FinalityMode {_FINALITY_MODES} != chains.finality_modes {FINALITY_MODES}")
_STORE_SCHEMES = ("sqlite://", "postgresql://", "postgresql+psycopg://")
_RPC_SCHEMES = ("http", "https", "ws", "wss")
_CHAIN_NAME = re.compile(r"[a-z0-9_-]+")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

_Loc = tuple[str | int, ...]


class ConfigError(Exception):
    """The configuration cannot be used; the message has one line per problem.

    Each line reads ``SOURCE: KEY: what is wrong`` (``KEY`` is a path such as
    ``chains[0].confirmations``), or ``SOURCE: what is wrong`` when no key is involved
    (a missing file, a TOML syntax error with its line).
    """

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        """The file (or ``<string>``) the configuration came from."""
        self.problems: tuple[str, ...] = tuple(problems)
        """One entry per problem, without the source prefix."""
        super().__init__("\n".join(f"{source}: {p}" for p in self.problems))


class UnknownChainName(LookupError):
    """A chain name that is not in the configuration."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.name = name
        """The name asked for."""
        self.known: tuple[str, ...] = tuple(known)
        """The configured chain names."""
        listed = ", ".join(self.known) or "(none)"
        super().__init__(f"unknown chain {name!r}; configured chains: {listed}")


class _KeyedErrors(ValueError):
    """Raised by a model validator to report problems at keys below the model."""

    def __init__(self, problems: Sequence[tuple[_Loc, str]]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(f"{_key(loc)}: {msg}" for loc, msg in self.problems))


class _Strict(BaseModel):
    """Base of every config model: unknown keys and loose types are errors; values frozen."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    def _fill(self, name: str, value: object) -> None:
        """Set a defaulted field during validation (the model is frozen afterwards)."""
        self.__dict__[name] = value


class StoreConfig(_Strict):
    """Where settlements, verdicts and the outbox are stored.

    ``url`` is an SQLAlchemy URL: ``sqlite:///finality.db`` (a file relative to the daemon's
    current working directory), ``sqlite:////var/lib/finality/finality.db`` (absolute), or
    ``postgresql://user@host/db`` / ``postgresql+psycopg://...`` for several instances.
    """

    url: str = "sqlite:///finality.db"
    """SQLAlchemy URL of the store: ``sqlite://...`` or ``postgresql[+psycopg]://...``."""

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        if not value.startswith(_STORE_SCHEMES):
            raise ValueError("must start with sqlite://, postgresql:// or postgresql+psycopg://")
        if value.startswith("postgresql") and not urlsplit(value).netloc:
            raise ValueError("a PostgreSQL URL needs a host, e.g. postgresql://user@host/db")
        return value


def _split_listen(value: str) -> tuple[str, int]:
    """``"HOST:PORT"`` (``"[::1]:PORT"`` for IPv6) → ``(host, port)``; ValueError if not."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError('must be "HOST:PORT", e.g. "127.0.0.1:8710"')
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or (":" in host and not value.startswith("[")):
        raise ValueError('must be "HOST:PORT" (write an IPv6 host as "[::1]:8710")')
    if not port_text.isascii() or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError("port must be an integer in 1..65535")
    return host, int(port_text)


class ApiConfig(_Strict):
    """Where the HTTP API (and the query commands of the CLI) listen."""

    listen: str = "127.0.0.1:8710"
    """``"HOST:PORT"``; an IPv6 host in brackets (``"[::1]:8710"``); port in 1..65535."""

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, value: str) -> str:
        _split_listen(value)
        return value

    @property
    def host(self) -> str:
        """The host part of ``listen`` (IPv6 without brackets)."""
        return _split_listen(self.listen)[0]

    @property
    def port(self) -> int:
        """The port part of ``listen``."""
        return _split_listen(self.listen)[1]


def _check_rpc_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in _RPC_SCHEMES or not parts.netloc:
        raise ValueError("must be a URL starting with http://, https://, ws:// or wss://")
    return value


class ChainConfig(_Strict):
    """One watched chain: where to reach it and when its blocks count as final.

    ``confirmations``, ``finality``, ``poll_interval_s`` and ``header_window`` may be omitted;
    validation fills them (from the registry entry for ``chain_id`` where there is one), so
    after validation they are never ``None``. Use the ``resolved_*`` properties for typed
    access.
    """

    name: str
    """Name used by the API and CLI (``--chain NAME``): lower-case letters, digits, _ and -."""
    chain_id: int = Field(gt=0)
    """EIP-155 chain id; checked against ``eth_chainId`` of every endpoint at start-up."""
    rpc: list[Annotated[str, AfterValidator(_check_rpc_url)]] = Field(min_length=1)
    """JSON-RPC endpoints (http, https, ws, wss), in order of preference; at least one."""
    confirmations: int | None = Field(default=None, ge=1)
    """Default depth N (head - block + 1) for finality; ``None`` → the registry's default."""
    finality: FinalityMode | None = None
    """Finality rule; ``None`` → the registry's default, or ``"depth"`` for unknown chains."""
    poll_interval_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds between head polls; ``None`` → the registry's block time, else 1.0."""
    timeout_s: float = Field(default=3600.0, gt=0, allow_inf_nan=False)
    """Settlement timeout used when a registration gives none."""
    max_wait_s: float = Field(default=86400.0, gt=0, allow_inf_nan=False)
    """Policy ceiling on any settlement's wait, whatever timeout a registration asks for."""
    header_window: int | None = None
    """Recent headers kept for reorg detection; ``None`` → max(2 N, N + 64); must be > N."""
    max_blocks_per_poll: int = Field(default=500, ge=1)
    """Most blocks fetched in one poll when catching up."""
    late_watch_s: float = Field(default=86400.0, ge=0, allow_inf_nan=False)
    """How long a timed-out settlement is still watched, to report late finality."""
    quorum: int = Field(default=1, ge=1)
    """k of the ``rpc`` endpoints that must agree (inclusion block hash, head deep enough)
    before a finality or failure is declared; 1 trusts the followed node alone."""
    receipt_headers: Literal["list", "compact"] = "list"
    """How receipts carry their header chain: ``list`` (``proof.headers``, JSON objects) or
    ``compact`` (``proof.header_chain``, RLP in base64, ~0.7 KB a header instead of ~1.6 KB;
    docs/receipts.md). Verifiers older than the compact format accept only ``list``."""

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not value:
            raise ValueError("must not be empty")
        if not _CHAIN_NAME.fullmatch(value):
            raise ValueError("must contain only lower-case letters, digits, '_' and '-'")
        return value

    @model_validator(mode="after")
    def _resolve_defaults(self) -> ChainConfig:
        known = known_chain(self.chain_id)
        problems: list[tuple[_Loc, str]] = []
        confirmations = self.confirmations
        if confirmations is None:
            if known is None:
                problems.append(
                    (
                        ("confirmations",),
                        f"is required: chain id {self.chain_id} is not a known chain, "
                        "so it has no default",
                    )
                )
            else:
                confirmations = known.default_confirmations
        finality = self.finality
        if finality is None:
            finality = "depth" if known is None else _as_finality(known.default_finality)
        elif finality in NEEDS_FINALIZED and known is not None and not known.supports_finalized:
            problems.append(
                (
                    ("finality",),
                    f"{finality!r} needs the 'finalized' tag, which "
                    f'{known.name} does not support; use "depth"',
                )
            )
        elif finality in NEEDS_SAFE and known is not None and not known.supports_safe:
            problems.append(
                (
                    ("finality",),
                    f"{finality!r} needs the 'safe' tag, which {known.name} does not support; "
                    f'use "{known.default_finality}"',
                )
            )
        poll = self.poll_interval_s
        if poll is None:
            poll = 1.0 if known is None else known.block_time_s
        if self.timeout_s > self.max_wait_s:
            problems.append(
                (
                    ("timeout_s",),
                    f"must be <= max_wait_s ({self.max_wait_s}) (got {self.timeout_s})",
                )
            )
        window = self.header_window
        if confirmations is not None:
            if window is None:
                window = max(2 * confirmations, confirmations + 64)
            elif window <= confirmations:
                problems.append(
                    (
                        ("header_window",),
                        f"must be > confirmations ({confirmations}) (got {window})",
                    )
                )
        if problems:
            raise _KeyedErrors(problems)
        self._fill("confirmations", confirmations)
        self._fill("finality", finality)
        self._fill("poll_interval_s", poll)
        self._fill("header_window", window)
        return self

    @property
    def resolved_confirmations(self) -> int:
        """``confirmations`` after defaults: the depth N required for finality."""
        return _resolved(self.confirmations, "confirmations")

    @property
    def resolved_finality(self) -> FinalityMode:
        """``finality`` after defaults."""
        return _resolved(self.finality, "finality")

    @property
    def finality_risk(self) -> str | None:
        """Why the finality rule may confirm too early, when the config wrote one that does
        not wait for L1 finality on an L2 chain (logged as a WARNING at start), else None.

        Only an explicit ``finality`` key can do that: the registry never defaults an L2 to
        such a rule, and a chain the registry does not know is not assumed to be an L2."""
        if "finality" not in self.model_fields_set:
            return None
        known = known_chain(self.chain_id)
        risk = L2_RISK.get(self.resolved_finality)
        if known is None or not known.is_l2 or risk is None:
            return None
        return (
            f"chain {self.name}: finality = {self.resolved_finality!r} on {known.name} "
            f"(chain id {self.chain_id}, an L2 of the {known.family} family): {risk}; "
            f'"{known.default_finality}" waits for L1 finality'
        )

    @property
    def resolved_poll_interval_s(self) -> float:
        """``poll_interval_s`` after defaults."""
        return _resolved(self.poll_interval_s, "poll_interval_s")

    @property
    def resolved_header_window(self) -> int:
        """``header_window`` after defaults."""
        return _resolved(self.header_window, "header_window")

    @property
    def resolved_heads_url(self) -> str | None:
        """The WebSocket URL new heads are subscribed on, if any."""
        if self.heads_url is not None:
            return self.heads_url
        return next((u for u in self.rpc if urlsplit(u).scheme in ("ws", "wss")), None)

    # -- appended for several endpoints (issue 7) -------------------------------------------

    rpc_weights: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] | None = None
    """Preference of each ``rpc`` endpoint among healthy ones (same length as ``rpc``)."""
    rpc_timeout_s: float = Field(default=5.0, gt=0, allow_inf_nan=False)
    """Per-call timeout of each endpoint when there are several (then failover is faster
    than waiting on a hung node)."""
    rpc_backoff_s: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    """First circuit-breaker open period of a failing endpoint; doubles, capped at 30 s."""
    rpc_rate_limits: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] | None = None
    """Most calls per second sent to each ``rpc`` endpoint (same length as ``rpc``);
    ``None``: no per-endpoint limit."""
    heads: Literal["poll", "ws"] = "poll"
    """How new heads are noticed: ``"poll"`` (every ``poll_interval_s``) or ``"ws"``
    (``eth_subscribe("newHeads")`` over WebSocket wakes the poller at once; polling goes on
    as the fallback while the subscription is down)."""
    heads_url: str | None = None
    """WebSocket URL for ``heads = "ws"``; ``None`` → the first ws:// or wss:// ``rpc``."""
    calls_per_minute: int | None = Field(default=None, ge=1)
    """Budget of JSON-RPC calls per minute for the chain (every endpoint, batch elements
    counted one by one); the watcher plans its polls within it. ``None``: no budget."""

    @model_validator(mode="after")
    def _check_endpoints(self) -> ChainConfig:
        problems: list[tuple[_Loc, str]] = []
        if self.quorum > len(self.rpc):
            problems.append(
                (
                    ("quorum",),
                    f"must be <= the number of rpc endpoints ({len(self.rpc)}) (got {self.quorum})",
                )
            )
        if self.rpc_rate_limits is not None and len(self.rpc_rate_limits) != len(self.rpc):
            problems.append(
                (
                    ("rpc_rate_limits",),
                    f"must have one limit per rpc endpoint ({len(self.rpc)}) "
                    f"(got {len(self.rpc_rate_limits)})",
                )
            )
        if self.heads_url is not None:
            try:
                _check_rpc_url(self.heads_url)
            except ValueError:
                problems.append((("heads_url",), "must be a URL starting with ws:// or wss://"))
            else:
                if urlsplit(self.heads_url).scheme not in ("ws", "wss"):
                    problems.append((("heads_url",), "must be a URL starting with ws:// or wss://"))
        if self.heads == "ws" and self.resolved_heads_url is None:
            problems.append(
                (
                    ("heads",),
                    '"ws" needs a WebSocket endpoint: set heads_url, or list a ws:// or '
                    "wss:// URL in rpc",
                )
            )
        if self.rpc_weights is not None and len(self.rpc_weights) != len(self.rpc):
            problems.append(
                (
                    ("rpc_weights",),
                    f"must have one weight per rpc endpoint ({len(self.rpc)}) "
                    f"(got {len(self.rpc_weights)})",
                )
            )
        if problems:
            raise _KeyedErrors(problems)
        return self


def _as_finality(value: str) -> FinalityMode:
    if value not in _FINALITY_MODES:  # the registry validates its entries; belt and braces
        raise ValueError(f"registry finality {value!r} is not one of {_FINALITY_MODES}")
    return cast(FinalityMode, value)


_T = TypeVar("_T")


def _resolved(value: _T | None, name: str) -> _T:
    if value is None:
        raise RuntimeError(f"ChainConfig.{name} is unset: build ChainConfig by validation")
    return value


Severity = Literal["info", "warning", "critical"]


class SigningConfig(_Strict):
    """How receipts are signed (an Ethereum key; EIP-712 typed data).

    The key comes from the environment variable named by ``key_env`` (hex private key), or
    from an encrypted keystore file (``keystore``, password in ``keystore_password_env``).
    With neither, and only when every configured chain is a local development chain, a
    development key is generated into ``dev_key_file`` with a loud warning.
    """

    key_env: str = "FINALITY_SIGNING_KEY"
    """Name of the environment variable holding a 0x hex private key."""
    keystore: str | None = None
    """Path of an encrypted JSON keystore (geth/eth-account format)."""
    keystore_password_env: str = "FINALITY_KEYSTORE_PASSWORD"
    """Name of the environment variable holding the keystore password."""
    dev_key_file: str = ".finality-dev-key"
    """Where the generated development key is kept (local chains only)."""


class DeliveryConfig(_Strict):
    """The outbox sender: commits, discards and webhook alerts."""

    secret: str | None = None
    """HMAC-SHA256 secret for the signature header (use "${FINALITY_WEBHOOK_SECRET}")."""
    max_attempts: int = Field(default=8, ge=1)
    """Attempts before an entry is dead-lettered."""
    backoff_initial_s: float = Field(default=1.0, gt=0)
    """First retry delay; doubles each attempt, with jitter."""
    backoff_max_s: float = Field(default=300.0, gt=0)
    """Cap on the retry delay."""
    timeout_s: float = Field(default=10.0, gt=0)
    """HTTP timeout of one delivery attempt."""
    workers: int = Field(default=4, ge=1)
    """Deliveries sent concurrently."""
    receipt_wait_s: float = Field(default=30.0, ge=0)
    """How long a commit/discard waits for its signed receipt before going out without it."""
    max_dependent_state_bytes: int = Field(default=65536, ge=1)
    """Largest accepted dependent_state (canonical JSON bytes); larger gets 413."""


class AlertChannelConfig(_Strict):
    """One ``[[alerts]]`` channel: which events go where."""

    type: Literal["webhook", "slack", "log"]
    """``webhook`` (JSON, signed, via the outbox), ``slack`` (Slack-compatible), ``log``."""
    url: str | None = None
    """Target URL (webhook and slack)."""
    events: list[str] = Field(default_factory=lambda: ["*"])
    """Event kinds to send (``reorg``, ``finality_violation``...); ``*`` for all."""
    min_severity: Severity = "info"
    """Lowest severity sent."""


class HandoffConfig(_Strict):
    """Sharing work between instances on one PostgreSQL store (leases with fencing)."""

    instance_id: str | None = None
    """This instance's name in leases and handoff records; default: host name and pid."""
    lease_s: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    """How long a chain's lease lasts without renewal; a standby takes over after it."""
    renew_s: float = Field(default=3.0, gt=0, allow_inf_nan=False)
    """How often the owner renews its leases: at most ``lease_s / 3``, so that a renewal
    that comes late, or fails once, still leaves the lease alive."""
    balance: bool = True
    """Share the chains and sources out over the live instances (fair share, rebalance);
    false: an instance takes every free lease and gives none away, so everything runs on
    the first instance and the others stand by (set it the same on every instance)."""

    @model_validator(mode="after")
    def _check_renewal(self) -> HandoffConfig:
        # A busy but healthy owner must never lose its lease: it gets two more tries
        # before the lease lapses (a tiny tolerance for float division like 1 / 3).
        if self.renew_s > self.lease_s / 3 + 1e-9:
            raise _KeyedErrors(
                [
                    (
                        ("renew_s",),
                        f"{self.renew_s:g} s is more than lease_s / 3 "
                        f"({self.lease_s:g} s / 3 = {self.lease_s / 3:.3g} s): renew at "
                        "least three times per lease, so a late or failed renewal does "
                        "not let the lease lapse",
                    )
                ]
            )
        return self


def _duplicates(
    table: str, key: str, what: str, values: Sequence[object]
) -> list[tuple[_Loc, str]]:
    """One problem per value already seen at a lower index of ``table`` (strings quoted)."""
    first: dict[object, int] = {}
    problems: list[tuple[_Loc, str]] = []
    for i, value in enumerate(values):
        if value in first:
            shown = repr(value) if isinstance(value, str) else str(value)
            problems.append(
                ((table, i, key), f"duplicate {what} {shown} (also {table}[{first[value]}].{key})")
            )
        first.setdefault(value, i)
    return problems


class Config(_Strict):
    """The whole configuration of one daemon instance."""

    store: StoreConfig = Field(default_factory=StoreConfig)
    """The ``[store]`` table."""
    api: ApiConfig = Field(default_factory=ApiConfig)
    """The ``[api]`` table."""
    chains: list[ChainConfig] = Field(min_length=1)
    """The ``[[chains]]`` tables; names unique, chain ids unique."""
    signing: SigningConfig = Field(default_factory=SigningConfig)
    """The ``[signing]`` table."""
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    """The ``[delivery]`` table."""
    alerts: list[AlertChannelConfig] = Field(default_factory=list)
    """The ``[[alerts]]`` tables."""
    handoff: HandoffConfig = Field(default_factory=HandoffConfig)
    """The ``[handoff]`` table."""
    sources: list[SourceConfig] = Field(default_factory=list)
    """The ``[[sources]]`` tables (payment processors, job queues); names unique and distinct
    from chain names (a source's name is stored where a chain's name goes)."""

    @model_validator(mode="after")
    def _check_source_names(self) -> Config:
        problems: list[tuple[_Loc, str]] = []
        chains = {chain.name for chain in self.chains}
        for i, source in enumerate(self.sources):
            if source.name in chains:
                problems.append(
                    (("sources", i, "name"), f"{source.name!r} is already a chain name")
                )
        clashing = {loc[1] for loc, _ in problems}
        names = [source.name for source in self.sources]
        problems += [
            problem
            for problem in _duplicates("sources", "name", "source name", names)
            if problem[0][1] not in clashing
        ]
        problems.sort(key=lambda problem: problem[0][1])
        if problems:
            raise _KeyedErrors(problems)
        return self

    @model_validator(mode="after")
    def _check_unique(self) -> Config:
        problems = _duplicates("chains", "name", "chain name", [c.name for c in self.chains])
        problems += _duplicates("chains", "chain_id", "chain id", [c.chain_id for c in self.chains])
        problems.sort(key=lambda problem: problem[0][1])  # stable: by table index, name first
        if problems:
            raise _KeyedErrors(problems)
        return self

    def chain(self, name: str) -> ChainConfig:
        """The chain configured under ``name``; :class:`UnknownChainName` if there is none."""
        for chain in self.chains:
            if chain.name == name:
                return chain
        raise UnknownChainName(name, [c.name for c in self.chains])


def load_config(path: str | Path) -> Config:
    """Read, expand and validate the TOML file at ``path``; :class:`ConfigError` if unusable."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(source, [f"cannot read config file: {exc.strerror or exc}"]) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(source, [f"not UTF-8 text: {exc}"]) from exc
    return parse_config(text, source)


def parse_config(text: str, source: str = "<string>") -> Config:
    """Validate a TOML document; ``source`` names it in error messages."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, [f"invalid TOML: {exc}"]) from exc
    templates: dict[_Loc, str] = {}
    missing: list[str] = []
    expanded = _expand(raw, (), templates, missing)
    if missing:
        raise ConfigError(source, missing)
    try:
        return Config.model_validate(expanded)
    except ValidationError as exc:
        raise ConfigError(source, _describe(exc, templates)) from exc


def _expand(value: object, loc: _Loc, templates: dict[_Loc, str], missing: list[str]) -> object:
    """Replace ``${NAME}`` in every string below ``value``; record templates and unset names."""
    if isinstance(value, dict):
        return {k: _expand(v, (*loc, k), templates, missing) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, (*loc, i), templates, missing) for i, v in enumerate(value)]
    if not isinstance(value, str) or not _ENV_REF.search(value):
        return value
    templates[loc] = value

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            missing.append(f"{_key(loc)}: environment variable {name} is not set")
            return ""
        return os.environ[name]

    return _ENV_REF.sub(substitute, value)


def _key(loc: Iterable[str | int]) -> str:
    """``("chains", 0, "rpc", 1)`` → ``"chains[0].rpc[1]"``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "(top level)"


def _describe(exc: ValidationError, templates: dict[_Loc, str]) -> list[str]:
    """One ``KEY: what is wrong (got VALUE)`` line per pydantic error."""
    lines: list[str] = []
    for error in exc.errors():
        loc: _Loc = tuple(error["loc"])
        ctx: dict[str, Any] = error.get("ctx") or {}
        cause = ctx.get("error")
        if isinstance(cause, _KeyedErrors):
            lines.extend(f"{_key(loc + sub)}: {msg}" for sub, msg in cause.problems)
            continue
        message = _message(error["type"], loc, ctx, str(error["msg"]))
        if error["type"] not in ("missing", "extra_forbidden", "model_type", "dict_type"):
            message += f" (got {_shown(loc, error.get('input'), templates)})"
        lines.append(f"{_key(loc)}: {message}")
    return lines


def _message(kind: str, loc: _Loc, ctx: dict[str, Any], default: str) -> str:
    if kind == "value_error" and ctx.get("error") is not None:
        return str(ctx["error"])
    if kind == "extra_forbidden":
        guess = difflib.get_close_matches(str(loc[-1]), _field_names_at(loc[:-1]), n=1)
        return "unknown key" + (f" (did you mean {guess[0]!r}?)" if guess else "")
    if kind == "list_type" and loc == ("chains",):
        return "must be an array of tables: write [[chains]], not [chains]"
    fixed = {
        "missing": "is required",
        "greater_than_equal": f"must be >= {ctx.get('ge')}",
        "greater_than": f"must be > {ctx.get('gt')}",
        "less_than_equal": f"must be <= {ctx.get('le')}",
        "less_than": f"must be < {ctx.get('lt')}",
        "too_short": f"must have at least {ctx.get('min_length')} item(s)",
        "literal_error": f"must be one of {ctx.get('expected')}",
        "int_type": "must be an integer",
        "float_type": "must be a number",
        "finite_number": "must be a finite number",
        "string_type": "must be a string",
        "bool_type": "must be true or false",
        "list_type": "must be an array",
        "model_type": "must be a table",
        "dict_type": "must be a table",
    }
    return fixed.get(kind, default[:1].lower() + default[1:])


def _field_names_at(loc: _Loc) -> list[str]:
    """The keys the model at ``loc`` accepts (for "did you mean")."""
    tp: Any = Config
    for part in loc:
        if isinstance(part, int):
            args = get_args(tp)
            tp = args[0] if args else None
        elif isinstance(tp, type) and issubclass(tp, BaseModel) and part in tp.model_fields:
            tp = tp.model_fields[part].annotation
        else:
            return []
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return list(tp.model_fields)
    return []


def _shown(loc: _Loc, value: object, templates: dict[_Loc, str]) -> str:
    """The offending value for an error line: templates stay unexpanded, passwords hidden."""
    if loc in templates:
        return f"{templates[loc]!r}, from the environment"
    if isinstance(value, str):
        value = _hide_password(value)
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _hide_password(value: str) -> str:
    try:
        parts = urlsplit(value)
        if parts.password is None:
            return value
    except ValueError:
        return value
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


_SOURCE_SETTINGS: dict[str, frozenset[str]] = {
    "stripe_payment_intent": frozenset(
        {"api_key", "api_base", "webhook_secret", "webhook_tolerance_s", "finality_window_s"}
    ),
    "rq_job": frozenset({"redis_url", "heartbeat_limit_s"}),
    "celery_task": frozenset({"backend_url", "key_prefix"}),
}
"""The settings each built-in kind reads; setting another kind's is an error."""

_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


class SourceConfig(_Strict):
    """One ``[[sources]]`` table: a payment processor or job queue whose settlements are
    watched beside the chains' (see docs/sources.md)::

        [[sources]]
        name = "stripe"
        kind = "stripe_payment_intent"
        api_key = "${STRIPE_API_KEY}"          # polling; omit for webhooks only
        webhook_secret = "${STRIPE_WEBHOOK_SECRET}"
        finality_window_s = 604800             # final 7 days after success, if no refund
        timeout_s = 1209600                    # longer than the window
        max_wait_s = 1209600

        [[sources]]
        name = "jobs"
        kind = "rq_job"
        redis_url = "redis://127.0.0.1:6379/0"
        heartbeat_limit_s = 120

    The settings below the common ones belong to one kind each; a setting of another kind is
    an error, so a typo'd table never silently watches nothing. A kind added by a plugin
    (entry point group ``finality_watcher.sources``) reads its settings from ``options``.
    """

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
    api_key: str | None = None
    """Stripe: secret API key for polling (``sk_...``); None for webhooks only."""
    api_base: str | None = None
    """Stripe: API base URL (``https://api.stripe.com`` when None)."""
    webhook_secret: str | None = None
    """Stripe: the endpoint's signing secret (``whsec_...``); None disables the webhook."""
    webhook_tolerance_s: int = Field(default=300, ge=1)
    """Stripe: largest age of a webhook's signed timestamp; older is refused (replay)."""
    finality_window_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Stripe: a succeeded payment is final this long after success if no refund or dispute
    appeared; None: final only when its balance transaction is ``available``."""
    redis_url: str | None = None
    """RQ: the Redis the jobs live in (``redis://host:port/db``)."""
    heartbeat_limit_s: float = Field(default=120.0, gt=0, allow_inf_nan=False)
    """RQ: a started job whose heartbeat is older than this has lost its worker; must exceed
    the workers' ``--job-monitoring-interval`` (30 s by default)."""
    backend_url: str | None = None
    """Celery: the Redis result backend (``redis://host:port/db``)."""
    key_prefix: str | None = None
    """Celery: the backend's ``global_keyprefix`` transport option, if the workers use one."""
    options: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Settings of a plugin kind (built-in kinds have none)."""

    @field_validator("name")
    @classmethod
    def _check_source_name(cls, value: str) -> str:
        if not _CHAIN_NAME.fullmatch(value) or len(value) > 64:
            raise ValueError(
                "must be 1..64 lower-case letters, digits, '_' and '-' (a chain name's rules)"
            )
        return value

    @field_validator("kind")
    @classmethod
    def _check_kind(cls, value: str) -> str:
        from watcher.sources.registry import EVM_KIND, known_kinds

        if value == EVM_KIND:
            raise ValueError("evm_tx settlements are watched through [[chains]], not [[sources]]")
        kinds = [k for k in known_kinds() if k != EVM_KIND]
        if value not in kinds:
            raise ValueError(f"unknown source kind {value!r}; known: {', '.join(kinds)}")
        return value

    @model_validator(mode="after")
    def _check_settings(self) -> SourceConfig:
        problems: list[tuple[_Loc, str]] = []
        mine = _SOURCE_SETTINGS.get(self.kind)
        for key in sorted(self.model_fields_set):
            owner = next((k for k, keys in _SOURCE_SETTINGS.items() if key in keys), None)
            if owner is not None and owner != self.kind:
                problems.append(((key,), f"is a setting of kind {owner}, not {self.kind}"))
        if mine is not None and self.options:
            problems.append((("options",), f"kind {self.kind} takes no options"))
        if self.timeout_s > self.max_wait_s:
            problems.append(
                (
                    ("timeout_s",),
                    f"must be <= max_wait_s ({self.max_wait_s}) (got {self.timeout_s})",
                )
            )
        if self.kind == "stripe_payment_intent":
            if self.api_key is None and self.webhook_secret is None:
                problems.append(
                    (
                        ("api_key",),
                        "a stripe source needs api_key (polling), webhook_secret, or both",
                    )
                )
            if self.api_base is not None and not self.api_base.startswith(("http://", "https://")):
                problems.append((("api_base",), "must be an http:// or https:// URL"))
            window = self.finality_window_s
            if window is not None and window >= self.timeout_s:
                problems.append(
                    (
                        ("finality_window_s",),
                        f"must be below timeout_s ({self.timeout_s}): payments would time out "
                        "before the window could confirm them; raise timeout_s",
                    )
                )
        for key, url in (("redis_url", self.redis_url), ("backend_url", self.backend_url)):
            required = (self.kind, key) in (("rq_job", "redis_url"), ("celery_task", "backend_url"))
            if url is None and required:
                problems.append(((key,), f"is required for kind {self.kind}"))
            elif url is not None and not url.startswith(_REDIS_SCHEMES):
                problems.append(((key,), "must be a redis://, rediss:// or unix:// URL"))
        if problems:
            raise _KeyedErrors(problems)
        return self
