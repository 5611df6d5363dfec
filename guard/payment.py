"""Payments to an address: the pure decision over counted transfers.

A payment settlement (kind ``evm_payment``) has no tx hash known in advance: it waits for
transfers of ``asset`` (the chain's native coin, or an ERC-20 token) to ``to``, optionally
only from ``sender``, and is final when the *final* transfers add up to ``amount``. The
engine counts the transfers (watcher/engine/payments.py); this module decides, with no
clock, network or store:

* :func:`payment_observation` turns the counted transfers, the chain's position and its
  finality rule (:mod:`guard.finality_rule`) into the guard's observation: finality
  evidence once the final transfers cover the amount, progress evidence (what was paid so
  far, final or not) otherwise;
* :func:`decide_payment` evaluates it with the settlement guard
  (:func:`guard.settlement.evaluate_settlement`): AWAITING_FINALITY, FINALITY_CONFIRMED, or
  TIMEOUT_TREATED_AS_FAILURE with what was paid in its evidence and directive (a partial
  payment is the caller's to refund).

Amounts are integers of base units (wei, token units); in JSON they are decimal strings, so
that no reader rounds them through a float.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from guard.errors import InvalidAddress
from guard.finality_rule import finality_basis
from guard.hexes import checksum_address, parse_checked_address
from guard.settlement import (
    Decision,
    Evidence,
    Observation,
    Settlement,
    SettlementPolicy,
    Verdict,
    evaluate_settlement,
)
from guard.types import UnixMillis

PAYMENT_KIND = "evm_payment"
"""The settlement kind of a payment to an address."""

DEPOSIT_KIND = "evm_deposit"
"""The settlement kind of one transfer seen to a subscription's watched address: a payment
of exactly what arrived, from whom it came, counted from its one transfer."""

ADDRESS_KINDS = frozenset({PAYMENT_KIND, DEPOSIT_KIND})
"""Settlement kinds decided from counted transfers to an address (no tx hash of their own)."""

NATIVE = "native"
"""The ``asset`` of the chain's own coin (top-level value transfers)."""

TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
"""topic0 of ERC-20 ``Transfer(address indexed from, address indexed to, uint256 value)``."""

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")


class InvalidPaymentField(ValueError):
    """A payment field is malformed; the message starts with the field's name."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


def parse_payment_address(value: object, field: str) -> str:
    """``value`` as a lower-case 0x address: all lower case, all upper case, or a correct
    EIP-55 checksum (a mixed-case address with a wrong checksum is a typo: refused)."""
    if not isinstance(value, str) or _ADDRESS.fullmatch(value) is None:
        raise InvalidPaymentField(field, "must be a 0x-prefixed 20-byte hex address")
    try:
        return parse_checked_address(value, field)
    except InvalidAddress:
        expected = checksum_address(value)
        raise InvalidPaymentField(
            field, f"EIP-55 checksum does not match (expected {expected})"
        ) from None


def parse_amount(value: object, field: str = "amount") -> int:
    """A decimal string of base units > 0 (no sign, no exponent, no fraction, < 2**256)."""
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        raise InvalidPaymentField(field, 'must be a decimal string of base units, e.g. "1000"')
    amount = int(value)
    if amount <= 0:
        raise InvalidPaymentField(field, "must be greater than 0")
    if amount >= 2**256:
        raise InvalidPaymentField(field, "must be below 2**256")
    return amount


@dataclass(frozen=True)
class PaymentSpec:
    """What a payment waits for."""

    to: str
    """Receiving address (lower-case 0x)."""
    asset: str
    """:data:`NATIVE` or the token contract (lower-case 0x)."""
    amount: int
    """Base units that must arrive, finally."""
    sender: str | None = None
    """Only transfers from this address count (lower-case 0x); None: from anyone."""


@dataclass(frozen=True)
class Transfer:
    """One counted transfer, in a block of the canonical chain."""

    tx_hash: str
    """The transaction that moved the value."""
    block_number: int
    """Its block."""
    block_hash: str
    """That block's hash."""
    tx_index: int
    """The tx's position in the block."""
    log_index: int | None
    """The ``Transfer`` log's index in the block (ERC-20); None for a native transfer."""
    sender: str
    """Who paid (the tx's ``from``, or the log's ``from``)."""
    value: int
    """Base units moved."""

    def order(self) -> tuple[int, int, int]:
        """Chain order: block, tx, log."""
        return (self.block_number, self.tx_index, -1 if self.log_index is None else self.log_index)


@dataclass(frozen=True)
class RulePosition:
    """The chain's position and finality rule, as the decision needs them."""

    mode: str
    """The finality rule (guard.finality_rule.FINALITY_MODES)."""
    required: int
    """Depth N."""
    head_number: int
    """Canonical head."""
    head_hash: str
    """Its hash."""
    finalized_number: int | None = None
    """The ``finalized`` tag, when fetched."""
    safe_number: int | None = None
    """The ``safe`` tag, when fetched."""

    def depth(self, block_number: int) -> int:
        """Confirmations of a block: head - block + 1 (0 above the head)."""
        return max(0, self.head_number - block_number + 1)

    def basis(self, block_number: int) -> str | None:
        """The basis on which the block is final, or None."""
        return finality_basis(
            self.mode,
            block_number,
            self.depth(block_number),
            self.required,
            self.finalized_number,
            self.safe_number,
        )


@dataclass(frozen=True)
class Totals:
    """What the transfers add up to against the amount."""

    paid: int
    """Sum of every counted transfer (final or not)."""
    paid_final: int
    """Sum of the final ones."""
    remaining: int
    """amount - paid, floored at 0."""
    overpaid: int
    """paid - amount, floored at 0."""


def totals(spec: PaymentSpec, transfers: list[Transfer], pos: RulePosition) -> Totals:
    """Paid, paid finally, remaining and overpaid of ``transfers`` at ``pos``."""
    return _totals(spec, transfers, [pos.basis(t.block_number) for t in transfers])


def _totals(spec: PaymentSpec, transfers: list[Transfer], bases: list[str | None]) -> Totals:
    """:func:`totals` given each transfer's basis (``bases``, in the same order)."""
    paid = sum(t.value for t in transfers)
    final = sum(t.value for t, basis in zip(transfers, bases, strict=True) if basis is not None)
    return Totals(paid, final, max(0, spec.amount - paid), max(0, paid - spec.amount))


def transfer_facts(t: Transfer, pos: RulePosition) -> dict[str, object]:
    """A transfer as evidence facts (values as decimal strings)."""
    return _transfer_facts(t, pos, pos.basis(t.block_number))


def _transfer_facts(t: Transfer, pos: RulePosition, basis: str | None) -> dict[str, object]:
    """:func:`transfer_facts` given the transfer's basis at ``pos``."""
    return {
        "tx_hash": t.tx_hash,
        "block_number": t.block_number,
        "block_hash": t.block_hash,
        "tx_index": t.tx_index,
        "log_index": t.log_index,
        "from": t.sender,
        "value": str(t.value),
        "confirmations": pos.depth(t.block_number),
        "basis": basis,
    }


def payment_observation(
    chain: str,
    spec: PaymentSpec,
    transfers: list[Transfer],
    pos: RulePosition,
    now: int,
    hold: str | None = None,
) -> Observation:
    """The guard's observation of a payment: finality when the final transfers add up to
    the amount (its basis: the one of the latest final transfer, the last to become final),
    else progress with what was paid so far (no evidence before the first transfer).

    ``hold``: why the finality gate (a quorum of endpoints) has not approved the blocks yet;
    finality is then shown as progress (``awaiting_quorum``), so the guard waits."""
    return _observe(chain, spec, transfers, pos, now, hold)[0]


def _observe(
    chain: str,
    spec: PaymentSpec,
    transfers: list[Transfer],
    pos: RulePosition,
    now: int,
    hold: str | None,
) -> tuple[Observation, Totals]:
    """:func:`payment_observation` and the transfers' :class:`Totals`, each transfer's basis
    found once (a block finalizing 1,000 deposits found each one five times)."""
    ordered = sorted(transfers, key=Transfer.order) if len(transfers) > 1 else transfers
    bases = [pos.basis(t.block_number) for t in ordered]
    sums = _totals(spec, ordered, bases)
    at = UnixMillis(now)
    facts: dict[str, object] = {
        "chain": chain,
        "to": spec.to,
        "asset": spec.asset,
        "from": spec.sender,
        "amount": str(spec.amount),
        "paid": str(sums.paid),
        "paid_final": str(sums.paid_final),
        "remaining": str(sums.remaining),
        "overpaid": str(sums.overpaid),
        "required_confirmations": pos.required,
        "finality_mode": pos.mode,
        "head_number": pos.head_number,
        "head_hash": pos.head_hash,
        "finalized_number": pos.finalized_number,
        "transfers": [_transfer_facts(t, pos, b) for t, b in zip(ordered, bases, strict=True)],
    }
    final = [b for b in bases if b is not None]
    if final and sums.paid_final >= spec.amount:
        basis = final[-1]
        if hold is not None:
            held = Evidence.of("awaiting_quorum", at, **facts, awaiting=basis, reason=hold)
            return Observation(progress=held), sums
        return Observation(finality=Evidence.of(basis, at, **facts)), sums
    if not ordered:
        return Observation(), sums
    return Observation(progress=Evidence.of("payment_progress", at, **facts)), sums


def decide_payment(
    settlement: Settlement,
    chain: str,
    spec: PaymentSpec,
    transfers: list[Transfer],
    pos: RulePosition,
    policy: SettlementPolicy,
    now: int,
    hold: str | None = None,
) -> Decision:
    """The payment's decision at ``now`` (``hold``: see :func:`payment_observation`). A
    timeout's directive says what was paid and that refunding a partial payment is the
    caller's (the watcher moves no funds); so does its evidence (the last progress), which
    the digest binds."""
    observation, sums = _observe(chain, spec, transfers, pos, now, hold)
    decision = evaluate_settlement(settlement, observation, policy, UnixMillis(now))
    asset = "wei" if spec.asset == NATIVE else f"units of token {spec.asset}"
    if decision.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE:
        paid = (
            f" Paid {sums.paid} of {spec.amount} {asset} ({sums.paid_final} final) to {spec.to}:"
            " refunding what was paid is the caller's (the watcher moves no funds)."
            if sums.paid > 0
            else f" Nothing was paid to {spec.to}."
        )
        return replace(decision, directive=decision.directive + paid)
    if decision.verdict is Verdict.FINALITY_CONFIRMED:
        over = f"; overpaid by {sums.overpaid}" if sums.overpaid > 0 else ""
        return replace(
            decision,
            directive=decision.directive + f" Paid {sums.paid_final} of {spec.amount} {asset}"
            f" finally to {spec.to}{over}.",
        )
    return decision
