"""The small tables of a config file: ``[store]``, ``[api]`` (in :mod:`.api`), ``[signing]``, ``[delivery]``,
``[[alerts]]`` and ``[handoff]`` (``[[chains]]`` and ``[[sources]]`` have modules of their
own: they carry most of the rules)."""

from __future__ import annotations

import importlib.util
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from watcher.config.api import ApiConfig as ApiConfig
from watcher.config.api import split_listen as split_listen
from watcher.config.base import KeyedErrors, Strict
from watcher.config.webhook_secret import webhook_key
from watcher.destinations import check_entries
from watcher.invoices.xpub import parse_extended_public_key, parse_template

_STORE_SCHEMES = ("sqlite://", "postgresql://", "postgresql+psycopg://")


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported (found, and not blocked in ``sys.modules``),
    without importing it: the config is checked before anything heavy loads."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a None entry in sys.modules: blocked
        return False


Severity = Literal["info", "warning", "critical"]


class StoreConfig(Strict):
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
        if value.startswith("postgresql") and not _installed("psycopg"):
            raise ValueError(
                "a PostgreSQL store needs the postgres extra (the psycopg driver), which is "
                "not installed: pip install 'finality-watcher[postgres]' (from a checkout: "
                "pip install '.[postgres]')"
            )
        return value


class SigningConfig(Strict):
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


class DeliveryConfig(Strict):
    """The outbox sender: commits, discards and webhook alerts."""

    secret: str | None = None
    """HMAC-SHA256 key of the signature headers: ``"whsec_<base64>"``, the Standard Webhooks
    form receivers' libraries take (use "${FINALITY_WEBHOOK_SECRET}")."""
    max_attempts: int = Field(default=8, ge=1)
    """Attempts before an entry is dead-lettered."""
    backoff_initial_s: float = Field(default=1.0, gt=0)
    """First retry delay; doubles each attempt, with jitter."""
    backoff_max_s: float = Field(default=300.0, gt=0)
    """Cap on the retry delay."""
    timeout_s: float = Field(default=10.0, gt=0)
    """Deadline of one delivery attempt, whole (connect, send, answer): a receiver that
    answers slowly fails the attempt once it passes."""
    workers: int = Field(default=4, ge=1)
    """Deliveries sent concurrently."""
    max_per_destination: int = Field(default=2, ge=1)
    """Attempts to one destination (scheme, host, port) at once: a slow receiver holds no
    more workers than this, so other destinations' deliveries keep going."""
    receipt_wait_s: float = Field(default=30.0, ge=0)
    """After this, a commit/discard still waiting for its signed receipt is looked at less
    often (it never goes without it); a finality violation goes without its revocation."""
    max_dependent_state_bytes: int = Field(default=65536, ge=1)
    """Largest accepted dependent_state (canonical JSON bytes); larger gets 413."""
    allow_destinations: list[str] = Field(default_factory=list)
    """Destinations a ``commit_url`` or an alert URL may point at although they are not
    public addresses (watcher/destinations.py): an IP (``"10.0.0.5"``), a network
    (``"10.1.0.0/16"``) or a host name (``"hooks.internal"``), each optionally with a port
    (``"hooks.internal:8443"``, ``"[fd00::1]:443"``). Loopback is allowed without an entry
    when every chain is a local development chain."""

    @model_validator(mode="after")
    def _check_secret(self) -> DeliveryConfig:
        # Reported through KeyedErrors so the message never quotes the value.
        if self.secret is not None:
            try:
                webhook_key(self.secret)
            except ValueError as exc:
                raise KeyedErrors([(("secret",), f"{exc} (value not shown)")]) from None
        return self

    @field_validator("allow_destinations")
    @classmethod
    def _check_destinations(cls, value: list[str]) -> list[str]:
        problems = check_entries(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value


class AlertChannelConfig(Strict):
    """One ``[[alerts]]`` channel: which events go where."""

    type: Literal["webhook", "slack", "log"]
    """``webhook`` (JSON, signed, via the outbox), ``slack`` (Slack-compatible), ``log``."""
    url: str | None = None
    """Target URL (webhook and slack)."""
    events: list[str] = Field(default_factory=lambda: ["*"])
    """Event kinds to send (``reorg``, ``finality_violation``...); ``*`` for all."""
    min_severity: Severity = "info"
    """Lowest severity sent."""


class HandoffConfig(Strict):
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
            raise KeyedErrors(
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


class PaymentsConfig(Strict):
    """Invoices at fresh addresses (``[payments]``; docs/invoices.md).

    ``xpub`` is an account-level BIP-32 extended *public* key (``xpub…``, ``tpub…``): each
    invoice's address is derived from it by ``derivation`` at the next unused index. An
    extended private key is refused: the watcher never holds a key that can spend."""

    xpub: str | None = None
    """The extended public key; None: invoices are off (``POST /v1/invoices`` answers 409)."""
    derivation: str = "m/0/{index}"
    """The path below ``xpub``, with one ``{index}`` step (no hardened step)."""

    @field_validator("xpub")
    @classmethod
    def _public_only(cls, value: str | None) -> str | None:
        if value is not None:
            parse_extended_public_key(value)  # ExtendedKeyError is a ValueError: named
        return value

    @field_validator("derivation")
    @classmethod
    def _template(cls, value: str) -> str:
        parse_template(value)
        return value
