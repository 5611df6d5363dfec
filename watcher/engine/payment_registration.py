"""The rows a payment registration writes: its settlement, its id and its spec.

A payment's id cannot come from what it waits for: two orders of the same amount to the
same address are two payments. It is fresh per registration (``pay_`` and 24 random hex
digits) unless the caller gives an idempotency ``reference``: then it is derived from
(chain, owner, reference), so a repeat with the same reference finds the same settlement
(and a different payment under a reused reference is refused). The settlement row's
``tx_hash`` holds the id itself (no tx matches it). Registration costs no call: transfers
count in blocks above the head stored for the chain at that instant.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from guard.payment import PAYMENT_KIND, PaymentSpec
from guard.types import SettlementId
from watcher.config.chains import ChainConfig
from watcher.settlements import Awaiting, awaiting_row
from watcher.store import NewSettlement
from watcher.store.payment_records import NewPaymentSpec


@dataclass(frozen=True)
class PaymentRegistration:
    """A validated payment registration."""

    chain: ChainConfig
    """The chain it is paid on."""
    spec: PaymentSpec
    """What it waits for."""
    confirmations: int | None = None
    """N; None uses the chain's default."""
    timeout_s: float | None = None
    """Timeout; None uses the chain's default."""
    dependent_state: dict[str, Any] | None = None
    """State to commit on finality."""
    commit_url: str | None = None
    """Where commits go."""
    reference: str | None = None
    """The caller's idempotency key (an order id)."""
    owner: str = "anonymous"
    """The API caller it belongs to."""


def payment_id(chain: str, owner: str, reference: str | None) -> str:
    """``pay_`` + 24 hex: derived from (chain, owner, reference), or random without one."""
    if reference is None:
        return "pay_" + secrets.token_hex(12)
    key = f"{PAYMENT_KIND}:{chain}:{owner}:{reference}".encode()
    return "pay_" + hashlib.sha256(key).hexdigest()[:24]


def new_payment(
    reg: PaymentRegistration, now: int, head_number: int | None
) -> tuple[NewSettlement, NewPaymentSpec]:
    """The settlement row and spec of ``reg`` at ``now``; ``head_number`` is the chain's
    stored head (transfers count above it), None when none is stored yet. The row's
    ``tx_hash`` is the payment's id (no tx matches it)."""
    sid = SettlementId(payment_id(reg.chain.name, reg.owner, reg.reference))
    awaiting = Awaiting(
        reg.chain, reg.confirmations, reg.timeout_s, reg.dependent_state, reg.commit_url
    )
    new = awaiting_row(awaiting, sid, sid, reg.owner, now, kind=PAYMENT_KIND)
    spec = NewPaymentSpec(
        to_address=reg.spec.to,
        asset=reg.spec.asset,
        amount=str(reg.spec.amount),
        sender=reg.spec.sender,
        after_block=head_number,
        reference=reg.reference,
    )
    return new, spec
