"""Frozen rows of the deposit tables (``subscriptions``, ``subscription_addresses``,
``deposits``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class NewSubscription:
    """What a subscription's creation writes (its addresses go beside it)."""

    subscription_id: str
    """``sub_`` + hex."""
    chain: str
    """Chain name."""
    owner: str
    """The API caller it belongs to."""
    assets: tuple[str, ...]
    """``native`` and/or token contracts (lower-case 0x)."""
    confirmations: int | None
    """N for its deposits; None: the chain's rule."""
    commit_url: str | None
    """Where each deposit's commit is delivered on finality."""
    reference: str | None
    """The caller's own label."""
    after_block: int | None
    """Transfers count in blocks above this one (the stored head at creation)."""
    created_at: int
    """Unix ms."""


@dataclass(frozen=True)
class SubscriptionRecord:
    """A subscription as stored."""

    subscription_id: str
    """Id."""
    chain: str
    """Chain name."""
    owner: str
    """Its caller."""
    assets: str
    """JSON list of assets."""
    confirmations: int | None
    """N; None: the chain's rule."""
    commit_url: str | None
    """Commit destination."""
    reference: str | None
    """The caller's label."""
    after_block: int | None
    """Transfers count above this block."""
    active: bool
    """False once deleted."""
    created_at: int
    """Unix ms."""


class AddressWatch(NamedTuple):
    """One watched address of one active subscription, as the engine's index reads it (a
    tuple: 100,000 of them are read at once when a large subscription is indexed, and a
    tuple of strings and ints is built fast and left alone by the cyclic collector)."""

    seq: int
    """Insertion order."""
    subscription_id: str
    """Its subscription."""
    address: str
    """Lower-case 0x."""
    after_block: int | None
    """Transfers count in blocks above this one."""


@dataclass(frozen=True)
class NewDeposit:
    """A transfer seen to a watched address, to be stored as a deposit (once)."""

    settlement_id: str
    """Derived from its identity (guard.deposit.deposit_id)."""
    subscription_id: str
    """The subscription whose address it paid."""
    tx_hash: str
    """The tx that moved the value."""
    ordinal: int
    """Which of the tx's transfers of this asset to this address (0 for native)."""
    address: str
    """The watched address."""
    asset: str
    """``native`` or the token contract."""


@dataclass(frozen=True)
class DepositRecord:
    """A deposit's own row."""

    settlement_id: str
    """Its settlement."""
    subscription_id: str
    """Its subscription."""
    chain: str
    """Chain name."""
    tx_hash: str
    """The tx that moved the value."""
    ordinal: int
    """Which of the tx's transfers of this asset to this address."""
    address: str
    """The watched address."""
    asset: str
    """``native`` or the token contract."""
