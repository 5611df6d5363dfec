"""Receipts for chains whose headers cannot be re-hashed: signed attestations, said so.

A decision receipt normally proves its block with a chain of headers the verifier re-hashes
as keccak(rlp(fields)) and with trie proofs against the inclusion header's roots. Some
chains' headers do not hash that way from their JSON-RPC fields (Avalanche's C-Chain adds
fields in its own order; see chains.registry ``headers_rehash``). A header chain built for
them would not verify, and a receipt that does not verify is worse than none: a reader
would learn nothing, or learn to ignore failures.

So such a chain gets an *attestation*: the same signed body, with ``proof: null``,
``attestation_only: true`` and an ``attestation`` object naming the block, the tx, its
status and the head the signer saw, and why no header chain is included. The verifier
checks the shape, the signature and the evidence cross-checks, and reports every chain fact
as the signer's word (:data:`ATTESTATION_CLAIM`): nothing was re-hashed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guard import receipts as fmt
from guard.errors import ReceiptInvalid
from guard.fields import child, field, hash32, integer, keys, text
from guard.verify_chain import Inclusion

FORM = "attestation"
"""``ChainFacts.transaction_form`` of an attestation (nothing was decoded)."""

ATTESTATION_FIELDS = (
    "reason",
    "block_number",
    "block_hash",
    "tx_hash",
    "tx_index",
    "status",
    "head_number",
    "head_hash",
)
"""The keys of the ``attestation`` object."""


def attestation_claim(reason: str) -> str:
    """The statement a verified attestation is reported with."""
    return (
        "no header chain was checked: this receipt is a signed attestation (" + reason + "); "
        "the block, the tx's place and status in it, and the depth are the signer's word"
    )


@dataclass(frozen=True)
class Attested:
    """What the signer saw, stated instead of proven."""

    reason: str
    """Why the chain's headers cannot be re-hashed (the registry's ``headers_note``)."""
    block_number: int
    """The block holding the tx (the watched one, or its replacement)."""
    block_hash: str
    """Its hash, as the node reported it."""
    tx_hash: str
    """The tx attested in that block."""
    tx_index: int
    """Its position."""
    status: int
    """Its receipt status (1 success, 0 reverted)."""
    head_number: int
    """The head at the decision."""
    head_hash: str
    """Its hash (``finality verify --rpc`` can ask a node whether it is still canonical)."""

    def as_json(self) -> dict[str, Any]:
        """The ``attestation`` object of a body."""
        return {name: getattr(self, name) for name in ATTESTATION_FIELDS}


def attestation_body(
    subject: fmt.Subject,
    issued_at: int,
    decision: Mapping[str, Any],
    attested: Attested,
    basis: fmt.FinalityBasis,
    dependent_state_digest: str | None,
    failure: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A finality receipt (``failure`` None) or a failure receipt (``failure`` the reason
    object, as in :func:`guard.receipts.reverted_body`) without a header chain."""
    kind = fmt.FINALITY if failure is None else fmt.FAILURE
    depth = max(0, attested.head_number - attested.block_number + 1)
    body = {
        **subject.head(kind, issued_at),
        "verdict": decision["verdict"],
        "decision_digest": decision["digest"],
        "evidence": decision.get("evidence"),
        "dependent_state_digest": dependent_state_digest,
        "finality": basis.as_json(depth),
        "proof": None,
        "attestation_only": True,
        "attestation": attested.as_json(),
    }
    if failure is not None:
        body["failure"] = dict(failure)
    return body


def attested_inclusion(body: Mapping[str, Any]) -> tuple[Inclusion, str]:
    """The inclusion an attestation states (checked for shape only), and its reason."""
    if body.get("attestation_only") is not True:
        raise ReceiptInvalid("attestation_only: must be true when present")
    if field(body, "proof", "") is not None:
        raise ReceiptInvalid("proof: an attestation carries no proof (null)")
    attested = child(body, "attestation", "")
    keys(attested, ATTESTATION_FIELDS, "attestation")
    reason = text(attested, "reason", "attestation")
    number = integer(attested, "block_number", "attestation")
    head = integer(attested, "head_number", "attestation")
    if head < number:
        raise ReceiptInvalid(f"attestation.head_number: {head} is below the block {number}")
    status = integer(attested, "status", "attestation")
    if status not in (0, 1):
        raise ReceiptInvalid(f"attestation.status: {status} is not 0 or 1")
    inclusion = Inclusion(
        block_number=number,
        block_hash=hash32(attested, "block_hash", "attestation"),
        tx_index=integer(attested, "tx_index", "attestation"),
        status=status,
        tx_bytes=b"",
        tx_hash=hash32(attested, "tx_hash", "attestation"),
        form=FORM,
        head_number=head,
        head_hash=hash32(attested, "head_hash", "attestation"),
        depth=head - number + 1,
    )
    return inclusion, reason
