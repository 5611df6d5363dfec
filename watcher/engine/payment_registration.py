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
from guard.settlement import (
    Observation,
    Settlement,
    SettlementPolicy,
    deadline_of,
    decision_as_json,
    evaluate_settlement,
)
from guard.types import SettlementId, UnixMillis
from watcher.config.chains import ChainConfig
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
    stored head (transfers count above it), None when none is stored yet."""
    chain = reg.chain
    sid = SettlementId(payment_id(chain.name, reg.owner, reg.reference))
    timeout_ms = int((reg.timeout_s if reg.timeout_s is not None else chain.timeout_s) * 1000)
    settlement = Settlement(sid, True, UnixMillis(now), timeout_ms)
    policy = SettlementPolicy(max_wait_ms=int(chain.max_wait_s * 1000))
    decision = evaluate_settlement(settlement, Observation(), policy, UnixMillis(now))
    new = NewSettlement(
        settlement_id=sid,
        chain=chain.name,
        tx_hash=sid,
        required_confirmations=reg.confirmations or chain.resolved_confirmations,
        finality_mode=chain.resolved_finality,
        timeout_ms=timeout_ms,
        initiated_at=now,
        deadline=deadline_of(settlement, policy),
        digest=decision.digest,
        decision=decision_as_json(decision),
        dependent_state=reg.dependent_state,
        commit_url=reg.commit_url,
        owner=reg.owner,
        kind=PAYMENT_KIND,
    )
    spec = NewPaymentSpec(
        to_address=reg.spec.to,
        asset=reg.spec.asset,
        amount=str(reg.spec.amount),
        sender=reg.spec.sender,
        after_block=head_number,
        reference=reg.reference,
    )
    return new, spec
