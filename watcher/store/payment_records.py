"""Frozen rows of the payment tables (``payment_specs``, ``payment_transfers``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NewPaymentSpec:
    """What a payment registration writes beside its settlement row."""

    to_address: str
    """Receiving address (lower-case 0x)."""
    asset: str
    """``native`` or the token contract (lower-case 0x)."""
    amount: str
    """Base units, a decimal string."""
    sender: str | None = None
    """Only transfers from this address count; None: from anyone."""
    after_block: int | None = None
    """Transfers count in blocks above this one (the stored head at registration)."""
    reference: str | None = None
    """The caller's idempotency key, when given."""


@dataclass(frozen=True)
class PaymentState:
    """What the engine's payment index follows of a payment just decided."""

    settlement_id: str
    """Id."""
    kind: str
    """``evm_payment`` or ``evm_deposit``."""
    watching: bool
    """Still watched (False: the index forgets it)."""


def payment_spec_values(settlement_id: str, chain: str, spec: NewPaymentSpec) -> dict[str, Any]:
    """The ``payment_specs`` row of a registration."""
    return {"settlement_id": settlement_id, "chain": chain, **vars(spec)}  # flat: no deep copy


@dataclass(frozen=True)
class PaymentSpecRecord:
    """A payment's spec as stored."""

    settlement_id: str
    """Its settlement."""
    chain: str
    """Chain name."""
    to_address: str
    """Receiving address."""
    asset: str
    """``native`` or the token contract."""
    amount: str
    """Base units, a decimal string."""
    sender: str | None
    """The ``from`` filter."""
    after_block: int | None
    """Transfers count in blocks above this one; None: in every block processed after it."""
    reference: str | None
    """The caller's idempotency key."""


@dataclass(frozen=True)
class NewTransfer:
    """A transfer the engine counts for a payment."""

    settlement_id: str
    """The payment it counts for."""
    tx_hash: str
    """The tx that moved the value."""
    block_number: int
    """Its block."""
    block_hash: str
    """That block's hash."""
    tx_index: int
    """The tx's position."""
    log_index: int | None
    """The ``Transfer`` log's index in the block; None for a native transfer."""
    sender: str
    """Who paid."""
    value: str
    """Base units, a decimal string."""


@dataclass(frozen=True)
class TransferRecord:
    """A counted transfer as stored (its block is canonical: a reorg deletes it)."""

    id: int
    """Sequence."""
    settlement_id: str
    """The payment it counts for."""
    chain: str
    """Chain name."""
    tx_hash: str
    """The tx that moved the value."""
    block_number: int
    """Its block."""
    block_hash: str
    """That block's hash."""
    tx_index: int
    """The tx's position in the block."""
    log_index: int | None
    """The ``Transfer`` log's index in the block; None for a native transfer."""
    sender: str
    """Who paid."""
    value: str
    """Base units, a decimal string."""


@dataclass(frozen=True)
class PaymentWatch:
    """What the engine's payment index holds of one watched payment."""

    seq: int
    """Insertion order of its settlement."""
    settlement_id: str
    """Id."""
    to_address: str
    """Receiving address."""
    asset: str
    """``native`` or the token contract."""
    sender: str | None
    """The ``from`` filter."""
    after_block: int | None
    """Transfers count above this block."""
