"""Offline receipt verification for callers: no daemon, no network, only guard/.

A third party that was handed a receipt checks it here (or with ``finality verify``): the
signature, the digest, and the chain evidence the receipt carries. An invalid receipt is an
answer (``valid=False`` and the precise reason), not an exception, so an agent can act on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guard.errors import GuardError, ReceiptInvalid, ReceiptUnreadable
from guard.hexes import parse_checked_address
from guard.receipt_json import parse_receipt
from guard.verify import VerifiedReceipt, verify_receipt


@dataclass(frozen=True)
class Verification:
    """The answer: ``valid``, and either ``reason`` (why not) or ``receipt`` (what it says)."""

    valid: bool
    reason: str | None = None
    receipt: VerifiedReceipt | None = None
    payment: Mapping[str, Any] | None = None
    """For a payment (settlement kind ``evm_payment``): the receipt's ``payment`` section,
    checked (to, asset, amount, from, paid, remaining and the transfers; on a finality
    receipt each transfer proven); else None."""

    def as_json(self) -> dict[str, Any]:
        """``{"valid": true, ...}`` or ``{"valid": false, "reason": "..."}``."""
        if not self.valid or self.receipt is None:
            return {"valid": False, "reason": self.reason}
        r = self.receipt
        return {
            "valid": True,
            **r.identity(),
            "summary": r.summary(),
            **({} if self.payment is None else {"payment": dict(self.payment)}),
        }


def verify(
    receipt: Mapping[str, Any] | str | bytes, *, signers: Sequence[str] | None = None
) -> Verification:
    """Check ``receipt`` (as ``GET /v1/settlements/{id}/receipt`` serves it: the parsed
    document, or its text) offline. Any input gets an answer, never an exception: a text
    that is not JSON, or JSON that is no receipt, is ``Verification(False, reason)``.

    ``signers``: accept only these addresses (see ``GET /v1/signers``; a mixed-case one must
    carry its EIP-55 checksum); without them any signer the signature recovers is accepted
    and named in the answer, for you to judge."""
    try:
        trusted = (
            None if signers is None else [str(parse_checked_address(s, "signer")) for s in signers]
        )
    except GuardError as exc:
        return Verification(False, str(exc))
    try:
        document = parse_receipt(receipt) if isinstance(receipt, str | bytes) else receipt
        verified = verify_receipt(document, trusted_signers=trusted)
    except (ReceiptInvalid, ReceiptUnreadable) as exc:
        return Verification(False, exc.reason)
    payment = document.get("payment")
    return Verification(
        True, receipt=verified, payment=payment if isinstance(payment, Mapping) else None
    )
