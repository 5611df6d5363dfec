"""``[[chains]]``: one watched chain, where to reach it and when its blocks count as final.

Keys a chain may omit are filled from :mod:`chains.registry` by ``chain_id`` during
validation; the ``resolved_*`` properties give them typed.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeVar, get_args
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, field_validator, model_validator

from chains.finality_modes import FINALITY_MODES, L2_RISK, NEEDS_FINALIZED, NEEDS_SAFE
from chains.registry import KnownChain, known_chain
from watcher.config.base import NAME, KeyedErrors, Loc, Strict

FinalityMode = Literal["depth", "finalized", "depth_or_finalized", "safe", "depth_and_finalized"]
"""How a chain's blocks become final: depth >= N, the node's ``finalized`` tag, either of
the two, the node's ``safe`` tag, or both depth and ``finalized`` (chains.finality_modes)."""

_FINALITY_MODES: tuple[FinalityMode, ...] = get_args(FinalityMode)
if _FINALITY_MODES != FINALITY_MODES:  # one list of names: chains.finality_modes
    raise RuntimeError(f"FinalityMode {_FINALITY_MODES} != chains.finality_modes {FINALITY_MODES}")
DEV_CHAIN_IDS = frozenset({31337, 1337})
"""Chain ids of local development chains (anvil, hardhat, ganache, geth --dev): with only
these, a development signing key is generated and loopback destinations are allowed."""

_RPC_SCHEMES = ("http", "https", "ws", "wss")


def check_rpc_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in _RPC_SCHEMES or not parts.netloc:
        raise ValueError("must be a URL starting with http://, https://, ws:// or wss://")
    return value


class ChainConfig(Strict):
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
    rpc: list[Annotated[str, AfterValidator(check_rpc_url)]] = Field(min_length=1)
    """JSON-RPC endpoints (http, https, ws, wss), in order of preference; at least one."""
    confirmations: int | None = Field(default=None, ge=1)
    """Default depth N (head - block + 1) for finality; ``None`` → the registry's default."""
    finality: FinalityMode | None = None
    """Finality rule; ``None`` → the registry's default, or ``"depth"`` for unknown chains."""
    poll_interval_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds between head polls; ``None`` → the registry's block time, else 1.0."""
    poll_pacing: bool = True
    """Move each poll to just after the node has the next block when the blocks come at the
    poll interval (watcher/app/pacing.py; settled, a few extra calls in a hundred blocks);
    false: strictly on the interval."""
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
    receipt_ancestry: Literal["history", "headers"] = "history"
    """How receipts link the tx's block to the confirming block: ``history`` (where the
    chain has the EIP-2935 contract and it is smaller, one ``eth_getProof`` per confirming
    block instead of the headers between; else the header chain, ``proof.ancestry`` saying
    why) or ``headers`` (the header chain, with no ``proof.ancestry``: the form verifiers
    before it accept)."""

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not value:
            raise ValueError("must not be empty")
        if not NAME.fullmatch(value):
            raise ValueError("must contain only lower-case letters, digits, '_' and '-'")
        return value

    @model_validator(mode="after")
    def _resolve_defaults(self) -> ChainConfig:
        known = known_chain(self.chain_id)
        problems: list[tuple[Loc, str]] = []
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
        finality = self._default_finality(known, problems)
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
            raise KeyedErrors(problems)
        self._fill("confirmations", confirmations)
        self._fill("finality", finality)
        self._fill("poll_interval_s", poll)
        self._fill("header_window", window)
        return self

    def _default_finality(
        self, known: KnownChain | None, problems: list[tuple[Loc, str]]
    ) -> FinalityMode:
        """The finality rule after defaults; a rule the known chain cannot serve is a problem."""
        finality = self.finality
        if finality is None:
            return "depth" if known is None else _as_finality(known.default_finality)
        if finality in NEEDS_FINALIZED and known is not None and not known.supports_finalized:
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
        return finality

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

    # -- appended for several endpoints ---------------------------------------------------

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
        problems: list[tuple[Loc, str]] = []
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
                check_rpc_url(self.heads_url)
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
            raise KeyedErrors(problems)
        return self

    # -- Ethereum consensus finality in the receipt ------------------------------------------

    beacon_api: list[Annotated[str, AfterValidator(check_beacon_url)]] = Field(default_factory=list)
    """Beacon API endpoints (http, https), in order of preference: finality receipts then
    carry a ``consensus`` section (docs/receipts.md) proving the block final by Ethereum's
    sync committees. Empty: receipts are signed-only."""
    consensus_checkpoint: str | None = Field(default=None, pattern=r"^0x[0-9a-fA-F]{64}$")
    """A beacon block root the operator trusts (a recent finalized checkpoint, from a
    source of their own; at most a few weeks old): the light client starts there."""
    consensus_network: str = "mainnet"
    """The beacon network of ``beacon_api`` (guard.consensus.NETWORKS: mainnet, sepolia;
    minimal for tests)."""

    @model_validator(mode="after")
    def _check_consensus(self) -> ChainConfig:
        if not self.beacon_api:
            return self
        from guard.consensus import NETWORKS  # the pure core's list of networks

        problems: list[tuple[Loc, str]] = []
        if self.consensus_checkpoint is None:
            problems.append(
                (
                    ("consensus_checkpoint",),
                    "is required with beacon_api: the beacon block root the light client trusts",
                )
            )
        network = NETWORKS.get(self.consensus_network)
        if network is None:
            problems.append((("consensus_network",), f"must be one of {sorted(NETWORKS)}"))
        elif network.execution_chain_id not in (None, self.chain_id):
            problems.append(
                (
                    ("consensus_network",),
                    f"{network.name} finalizes chain id {network.execution_chain_id}, "
                    f"not {self.chain_id}",
                )
            )
        if self.resolved_finality not in NEEDS_FINALIZED:
            problems.append(
                (
                    ("beacon_api",),
                    f"needs a finality rule that waits for the 'finalized' block "
                    f"(got {self.resolved_finality!r}): consensus proves finalized blocks",
                )
            )
        if problems:
            raise KeyedErrors(problems)
        return self


def check_beacon_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be a URL starting with http:// or https://")
    return value.rstrip("/")


def _as_finality(value: str) -> FinalityMode:
    for mode in _FINALITY_MODES:  # the registry validates its entries; belt and braces
        if mode == value:
            return mode
    raise ValueError(f"registry finality {value!r} is not one of {_FINALITY_MODES}")


_T = TypeVar("_T")


def _resolved(value: _T | None, name: str) -> _T:
    if value is None:
        raise RuntimeError(f"ChainConfig.{name} is unset: build ChainConfig by validation")
    return value
