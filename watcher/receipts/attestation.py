"""Attestation receipts (guard.attestation) for chains whose headers do not re-hash.

The receipt builder asks :func:`attests_only` per chain; for such a chain it signs what the
decision's evidence says (block, tx position and status, head) instead of fetching a
header chain and trie proofs that the offline verifier could not check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chains.registry import known_chain
from guard.attestation import Attested, attestation_body
from guard.deposit import REORGED_OUT
from guard.payment import PAYMENT_KIND
from guard.receipts import FinalityBasis, Subject
from guard.settlement import Verdict


def attests_only(chain_id: int) -> str | None:
    """Why receipts of ``chain_id`` carry no header chain, or None when they can."""
    known = known_chain(chain_id)
    if known is None or known.headers_rehash:
        return None
    return known.headers_note


def no_receipt_by_design(
    chain_id: int, settlement_kind: str, evidence_kind: str, verdict: str
) -> str | None:
    """Why a terminal decision gets no receipt at all, by design (not for a failure that a
    retry may mend), else None: on a chain whose headers do not re-hash, a replacement (the
    replacing tx's position is not recorded: nothing to attest) and a payment's confirmation
    (no header chain to prove its transfers in). Its delivery goes without a receipt and
    says why; every other decision's delivery waits for its receipt."""
    why = attests_only(chain_id)
    if why is None:
        return None
    if evidence_kind == "replaced":
        return f"no receipt for a replacement on this chain: {why}"
    if settlement_kind == PAYMENT_KIND and verdict == Verdict.FINALITY_CONFIRMED:
        return f"no payment receipt on this chain: {why}"
    if evidence_kind == REORGED_OUT:  # its proof is a header chain at the deadline
        return f"no receipt for a reorged-out deposit on this chain: {why}"
    return None


def attestation_receipt(
    reason: str,
    subject: Subject,
    now: int,
    decision: Mapping[str, Any],
    basis: FinalityBasis,
    state: str | None,
) -> dict[str, Any]:
    """The attestation body for a terminal chain decision (finality or reverted; a
    replacement gets none: :func:`no_receipt_by_design`, asked by the builder first)."""
    evidence = decision.get("evidence") or {}
    kind = str(evidence.get("kind"))
    facts: Mapping[str, Any] = evidence.get("facts") or {}
    attested = Attested(
        reason=reason,
        block_number=int(facts["block_number"]),
        block_hash=str(facts["block_hash"]),
        tx_hash=subject.tx_hash,
        tx_index=int(facts["tx_index"]),
        status=int(facts["status"]),
        head_number=int(facts["head_number"]),
        head_hash=str(facts["head_hash"]),
    )
    failure = {"reason": "reverted"} if kind == "reverted" else None
    return attestation_body(subject, now, decision, attested, basis, state, failure)
