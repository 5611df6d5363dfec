"""The ``[api]`` table: where the HTTP API listens, and who may call it.

Callers authenticate with ``Authorization: Bearer TOKEN``; each ``[[api.tokens]]`` names a
caller (its settlements belong to it) and the scopes it holds::

    [[api.tokens]]
    name = "backend"
    token = "${FINALITY_BACKEND_TOKEN}"     # or sha256 = "<hex>": the file holds no secret
    scopes = ["read", "register"]

Without tokens the API is open (one anonymous caller with every scope), which is allowed
only on loopback: listening beyond it without tokens is a config error unless
``allow_open = true`` says so on purpose. Problems with a token are reported without its
value, so a typo never prints the secret.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from watcher.config.base import KeyedErrors, Loc, Strict, duplicates

Scope = Literal["read", "register", "admin"]
"""What a token may do: read views, register settlements, admin (replay, handoff, leases)."""

SCOPES: tuple[Scope, ...] = ("read", "register", "admin")
"""Every scope, in the order they are documented."""

MIN_TOKEN_CHARS = 16
"""Shortest accepted token: shorter ones are guessable."""

_HEX64 = re.compile(r"[0-9a-f]{64}")
_LOOPBACK_NAMES = ("localhost",)


def split_listen(value: str) -> tuple[str, int]:
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


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 without brackets) is this machine only."""
    if host.lower() in _LOOPBACK_NAMES or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ApiTokenConfig(Strict):
    """One ``[[api.tokens]]`` table: a caller, its secret (or the secret's digest), scopes."""

    name: str = Field(min_length=1, max_length=64)
    """The caller's name: settlements registered with this token belong to it."""
    token: str | None = None
    """The bearer token itself (write ``"${ENV_NAME}"`` so the file holds no secret)."""
    sha256: str | None = None
    """Instead of ``token``: the lower-case hex SHA-256 of the token's UTF-8 bytes."""
    scopes: list[Scope] = Field(min_length=1)
    """Any of ``read``, ``register``, ``admin``; ``register`` does not imply ``read``."""

    @model_validator(mode="after")
    def _check_secret(self) -> ApiTokenConfig:
        # Reported through KeyedErrors so the message never quotes the value.
        if (self.token is None) == (self.sha256 is None):
            raise KeyedErrors([(("token",), "give exactly one of token or sha256")])
        if self.token is not None and len(self.token) < MIN_TOKEN_CHARS:
            raise KeyedErrors(
                [(("token",), f"must be at least {MIN_TOKEN_CHARS} characters (value not shown)")]
            )
        if self.sha256 is not None and not _HEX64.fullmatch(self.sha256):
            raise KeyedErrors([(("sha256",), "must be 64 lower-case hex digits (a SHA-256)")])
        return self

    @property
    def digest(self) -> bytes:
        """The SHA-256 of the token: what a presented token is compared against."""
        if self.token is not None:
            return hashlib.sha256(self.token.encode("utf-8")).digest()
        return bytes.fromhex(self.sha256 or "")


class ApiConfig(Strict):
    """Where the HTTP API (and the query commands of the CLI) listen, and who may call it."""

    listen: str = "127.0.0.1:8710"
    """``"HOST:PORT"``; an IPv6 host in brackets (``"[::1]:8710"``); port in 1..65535."""
    tokens: list[ApiTokenConfig] = Field(default_factory=list)
    """The ``[[api.tokens]]`` tables; none: the API is open to one anonymous caller."""
    allow_open: bool = False
    """Serve without tokens even beyond loopback (only behind something that authenticates)."""
    open_health: bool = True
    """``/healthz`` and ``/metrics`` answer without a token; false: they need ``read``."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """Further names the ``Host`` header may carry (e.g. ``"finality.internal"``), besides
    the listen address (and loopback names when listening on loopback)."""
    live_lookup_timeout_s: float = Field(default=2.0, gt=0, le=60)
    """Longest a live look-up of an unregistered tx waits for the node; then the answer says
    what the store knows and that the live check timed out."""
    live_calls_per_minute: int = Field(default=600, ge=1)
    """JSON-RPC calls live look-ups may make per chain per minute (3-4 a look-up), apart from
    the chain's own ``calls_per_minute``, which they never spend; past it, 429."""
    live_lookups_per_caller_per_minute: int = Field(default=60, ge=1)
    """Live look-ups one caller (a token's name; the client's address without tokens) may
    make per minute; past it, 429 with ``Retry-After``."""

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, value: str) -> str:
        split_listen(value)
        return value

    @model_validator(mode="after")
    def _check_callers(self) -> ApiConfig:
        problems: list[tuple[Loc, str]] = duplicates(
            "tokens", "name", "token name", [t.name for t in self.tokens]
        )
        digests = [t.digest for t in self.tokens]
        problems += [
            (("tokens", i, "token"), f"the same token as tokens[{digests.index(d)}]")
            for i, d in enumerate(digests)
            if digests.index(d) != i
        ]
        if not self.tokens and not self.allow_open and not is_loopback(self.host):
            problems.append(
                (
                    ("listen",),
                    f"{self.host} is beyond loopback and no [[api.tokens]] are configured: "
                    "anyone who reaches the port could register and read; add tokens, or "
                    "set allow_open = true if something in front authenticates",
                )
            )
        if problems:
            raise KeyedErrors(problems)
        return self

    @property
    def host(self) -> str:
        """The host part of ``listen`` (IPv6 without brackets)."""
        return split_listen(self.listen)[0]

    @property
    def port(self) -> int:
        """The port part of ``listen``."""
        return split_listen(self.listen)[1]
