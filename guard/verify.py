"""Offline verification of a signed receipt: :func:`verify_receipt`.

It needs nothing but the receipt (no node, no key, no clock) and checks, in this order:

1. the shape: plain JSON a receipt can hold (:mod:`guard.receipt_json`: no float, no lone
   surrogate, bounded nesting), ``version`` 1, a known ``kind``, the common fields well
   formed;
2. the evidence, by kind (:mod:`guard.verify_decisions`, :mod:`guard.verify_terms`; for a
   payment or job source, chain id 0, :mod:`guard.verify_offchain`; for the four recorded
   elements of a handoff, :mod:`guard.handoff_receipts`): every header's hash recomputed as
   keccak256(rlp(header)) and each one the parent of the next; the depth they show; the
   receipt and transaction proofs against the inclusion header's roots; the receipt's
   status; the transaction's hash (and, for a replacement, both signers and nonces);
3. the ``digest`` (SHA-256 of the body's canonical JSON);
4. the signature: one spelling (0x and lower-case hex), EIP-712, low ``s``, recovering the
   receipt's ``signer``, and, when ``trusted_signers`` is given, one of those.

The first failing check raises :class:`~guard.errors.ReceiptInvalid` with one precise line
(``header 812: parentHash does not match block 811``, ``receipt proof: node 3 missing``,
``signature: signer 0x… is not trusted``). What the receipt states but cannot prove (the
node's ``finalized`` tag; a replacement link without the watched tx's bytes; which block was
the head at a deadline when no later block was known) is not an error: it is returned in
:attr:`VerifiedReceipt.claims`, so a reader knows what rests on the signer's word.

Whether the confirming head is still canonical is a question for a node, not for this
offline check: ``finality verify --rpc URL`` asks one about :attr:`VerifiedReceipt.anchor`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from guard import receipts as fmt
from guard.canonical import CanonicalError
from guard.errors import ReceiptInvalid
from guard.fields import address, hash32, integer, text
from guard.handoff_receipts import HANDOFF_KINDS, verify_handoff
from guard.receipt_json import check_plain_json
from guard.txs import TransactionError, recover_address
from guard.verify_chain import ChainFacts
from guard.verify_decisions import verify_decision
from guard.verify_terms import verify_binding, verify_offchain_binding, verify_revocation

_SIGNATURE = re.compile(r"0x[0-9a-f]{130}")


@dataclass(frozen=True)
class VerifiedReceipt:
    """What a receipt that verified says, and what in it rests on the signer's word."""

    kind: str
    """One of :data:`guard.receipts.KINDS`."""
    settlement_id: str
    """The watcher's settlement id."""
    chain: str
    """The watcher's chain name."""
    chain_id: int
    """EIP-155 chain id."""
    tx_hash: str
    """The watched transaction."""
    signer: str
    """Address the signature recovers (0x lower case)."""
    digest: str
    """The receipt's ``sha256:`` digest (its id)."""
    issued_at: int
    """When it was signed (ms)."""
    verdict: str | None
    """The attested verdict (decision kinds), else None."""
    facts: ChainFacts
    """What the chain evidence showed (block, depth, status, head at deadline...)."""
    claims: tuple[str, ...]
    """Statements of the receipt this verification could not check (the signer's word)."""
    handoff: Mapping[str, Any] | None = None
    """For a handoff element (:mod:`guard.handoff_receipts`): the takeover (name, owners,
    fencing tokens, reason, time, the guard's verdict); else None."""
    element: Mapping[str, Any] | None = None
    """For a handoff element: the recorded element itself; else None."""

    @property
    def anchor(self) -> tuple[int, str] | None:
        """(number, hash) of the block whose canonicity a node can confirm: the confirming
        head, or the head at the deadline; None when the receipt names no block."""
        return self.facts.anchor

    def summary(self) -> str:
        """One line for a human."""
        return f"{self.kind} for {self.tx_hash} on chain {self.chain_id}: {self.facts.summary}"

    def identity(self) -> dict[str, Any]:
        """What the receipt is about and who signed it, as JSON: the keys every answer of a
        verification starts with (the client's, ``finality verify --json``, the MCP tool)."""
        return {
            "kind": self.kind,
            "settlement_id": self.settlement_id,
            "chain_id": self.chain_id,
            "tx_hash": self.tx_hash,
            "verdict": self.verdict,
            "signer": self.signer,
            "digest": self.digest,
        }


def verify_receipt(
    receipt: Mapping[str, Any],
    trusted_signers: Collection[str] | None = None,
    *,
    signed_hashes: tuple[str, bytes] | None = None,
) -> VerifiedReceipt:
    """Check a receipt completely, offline; :class:`ReceiptInvalid` on the first failure.

    ``trusted_signers``: addresses (any case) whose signatures are accepted; ``None`` accepts
    any signer that the signature recovers (the caller then judges :attr:`signer`).

    ``signed_hashes``: only for a signer checking what it has just sealed, the body's
    :func:`~guard.receipt_format.body_hashes` it signed (not computed again: ~100 KB of
    canonical JSON at N = 64); all else is checked as for anyone. Never for a given receipt.
    """
    receipt = check_plain_json(receipt)
    version = receipt.get("version")
    if version != fmt.FORMAT_VERSION or isinstance(version, bool):
        raise ReceiptInvalid(f"version: {version!r} is not a supported receipt version (1)")
    kind = text(receipt, "kind", "")
    if kind not in fmt.KINDS and kind not in HANDOFF_KINDS:
        raise ReceiptInvalid(f"kind: {kind!r} is not a receipt kind")
    settlement_id = text(receipt, "settlement_id", "")
    chain = text(receipt, "chain", "")
    chain_id = integer(receipt, "chain_id", "")
    tx_hash = hash32(receipt, "tx_hash", "")
    issued_at = integer(receipt, "issued_at", "")
    signer = address(receipt, "signer", "")
    claimed_digest = text(receipt, "digest", "")
    signature = text(receipt, "signature", "")
    body = fmt.body_of(receipt)

    if kind in fmt.DECISION_KINDS:
        facts, claims = verify_decision(kind, body)
    elif kind in HANDOFF_KINDS:
        facts, claims = verify_handoff(kind, body)
    elif kind == fmt.BINDING and chain_id == fmt.OFFCHAIN_CHAIN_ID:
        facts, claims = verify_offchain_binding(body)
    elif kind == fmt.BINDING:
        facts, claims = verify_binding(body)
    else:
        facts, claims = verify_revocation(body)

    actual = _check_seal(body, claimed_digest, signature, signer, trusted_signers, signed_hashes)
    verdict, handoff = _verdict_of(kind, body)
    return VerifiedReceipt(
        kind=kind,
        settlement_id=settlement_id,
        chain=chain,
        chain_id=chain_id,
        tx_hash=tx_hash,
        signer=signer,
        digest=actual,
        issued_at=issued_at,
        verdict=None if verdict is None else str(verdict),
        facts=facts,
        claims=tuple(claims),
        handoff=handoff,
        element=body.get("element") if handoff is not None else None,
    )


def _verdict_of(kind: str, body: Mapping[str, Any]) -> tuple[Any, Any]:
    """(the verdict a receipt states, its handoff section): a decision's own verdict, a
    handoff receipt's the handoff's; neither for a binding or a revocation."""
    handoff = body.get("handoff") if kind in HANDOFF_KINDS else None
    if handoff is not None:
        return handoff.get("verdict"), handoff
    return (body.get("verdict") if kind in fmt.DECISION_KINDS else None), None


def _check_seal(
    body: Mapping[str, Any],
    claimed_digest: str,
    signature: str,
    signer: str,
    trusted_signers: Collection[str] | None,
    signed_hashes: tuple[str, bytes] | None = None,
) -> str:
    """The body's digest, once the trailer is shown to seal it: the digest matches the body,
    the signature over it recovers ``signer``, and ``signer`` is trusted (when a set is
    given); else :class:`ReceiptInvalid` naming the trailer field."""
    try:
        actual, message = fmt.body_hashes(body) if signed_hashes is None else signed_hashes
    except CanonicalError as exc:
        raise ReceiptInvalid(f"body: has no canonical JSON form: {exc}") from exc
    if claimed_digest != actual:
        raise ReceiptInvalid(f"digest: {claimed_digest} does not match the body ({actual})")
    recovered = _recover(message, signature)
    if recovered != signer:
        raise ReceiptInvalid(
            f"signature: recovers {recovered}, not the receipt's signer {signer} "
            "(the body or the signature was changed)"
        )
    if trusted_signers is not None and signer not in {s.lower() for s in trusted_signers}:
        raise ReceiptInvalid(f"signature: signer {signer} is not trusted")
    return actual


def _recover(message: bytes, signature: str) -> str:
    """The address that signed ``message`` (65-byte r || s || v, v = 27 or 28), written one
    way only: 0x and lower-case hex, so one receipt has one text."""
    if _SIGNATURE.fullmatch(signature) is None:
        raise ReceiptInvalid("signature: must be 0x and 65 bytes of lower-case hex (r || s || v)")
    raw = bytes.fromhex(signature[2:])
    v = raw[64]
    if v not in (27, 28):
        raise ReceiptInvalid(f"signature: v must be 27 or 28, got {v}")
    r, s = int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:64], "big")
    try:
        return recover_address(message, v - 27, r, s)
    except TransactionError as exc:
        raise ReceiptInvalid(f"signature: {exc}") from exc


__all__ = ["ChainFacts", "VerifiedReceipt", "verify_receipt"]
