"""Receipts about a payment or job *source* (Stripe, RQ, Celery: :mod:`guard.source`).

A source decision is signed as one of the same three decision kinds, with ``chain_id`` 0
(:data:`OFFCHAIN_CHAIN_ID`), ``tx_hash`` = keccak256 of the source's reference
(:func:`ref_hash`), and an ``offchain`` section instead of ``finality`` and ``proof``: what
the verifier (:mod:`guard.verify_offchain`) needs to recompute the decision's digest and the
objects' digest. Builders are pure, like :mod:`guard.receipt_bodies`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guard.hashing import keccak256
from guard.receipt_bodies import decided
from guard.receipt_format import (
    BINDING,
    OFFCHAIN_BOOKKEEPING,
    TIMEOUT,
    VERDICT_KIND,
    Subject,
)
from guard.source import objects_digest


def ref_hash(ref: str) -> str:
    """The 32-byte ``tx_hash`` of a source receipt: 0x keccak256 of the ref's UTF-8 bytes."""
    return "0x" + keccak256(ref.encode()).hex()


def offchain_objects(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The objects a source decision rests on, as its evidence recorded them: the evidence's
    own ``objects`` map (Stripe: object id -> digest of the version used) when it has one,
    else every fact but the bookkeeping ones (RQ: the job and its result; Celery: the task)."""
    objects = facts.get("objects")
    if isinstance(objects, Mapping):
        return dict(objects)
    return {k: v for k, v in facts.items() if k not in OFFCHAIN_BOOKKEEPING}


def decision_bound(
    verdict: str,
    settlement_id: str,
    initiated_at: int,
    timeout_ms: int,
    deadline: int,
    evidence: object,
    late_finality: object,
) -> dict[str, Any]:
    """What a decision's digest covers (:func:`guard.settlement.evaluate_settlement`, terminal
    verdicts of an initiated settlement): ``digest(decision_bound(...))`` is its digest."""
    bound: dict[str, Any] = {
        "verdict": verdict,
        "settlement_id": settlement_id,
        "initiated": True,
        "initiated_at": initiated_at,
        "timeout_ms": timeout_ms,
        "deadline": deadline,
        "evidence": evidence,
    }
    if late_finality is not None:
        bound["late_finality"] = late_finality
    return bound


@dataclass(frozen=True)
class OffchainTerms:
    """The source settlement a decision is about, and its registration terms."""

    source_kind: str
    """The source's kind (``stripe_payment_intent``, ``rq_job``, ``celery_task``...)."""
    source: str
    """The configured source name (the settlement's ``chain``)."""
    ref: str
    """The reference (PaymentIntent id, job id, task id)."""
    initiated_at: int
    """Registration instant (ms)."""
    timeout_ms: int
    """The settlement's own timeout."""


def offchain_body(
    subject: Subject,
    issued_at: int,
    decision: Mapping[str, Any],
    terms: OffchainTerms,
    history: Sequence[Mapping[str, Any]],
    dependent_state_digest: str | None,
) -> dict[str, Any]:
    """Body of a decision receipt for a source settlement (kind from the verdict).

    ``subject`` must have chain id :data:`OFFCHAIN_CHAIN_ID` and ``tx_hash`` =
    :func:`ref_hash` of the ref. The ``offchain`` section carries what the verifier needs to
    recompute the decision's digest (the terms) and the objects' digest (the objects), the
    event ids, and ``history``: the settlement's lifecycle entries up to this decision."""
    kind = VERDICT_KIND[str(decision["verdict"])]
    evidence = decision.get("evidence")
    facts: Mapping[str, Any] = (evidence or {}).get("facts") or {}
    objects = offchain_objects(facts)
    body = {**subject.head(kind, issued_at), **decided(decision, dependent_state_digest)}
    if kind == TIMEOUT:
        body["late_finality"] = decision.get("late_finality")
    body["offchain"] = {
        "type": "offchain",
        "source_kind": terms.source_kind,
        "source": terms.source,
        "ref": terms.ref,
        "decision_digest": decision["digest"],
        "initiated_at": terms.initiated_at,
        "timeout_ms": terms.timeout_ms,
        "deadline": decision["deadline"],
        "event_ids": list(facts.get("event_ids") or []),
        "objects": objects,
        "objects_digest": objects_digest(objects),
        "history": [dict(h) for h in history],
    }
    return body


def offchain_binding_body(
    subject: Subject,
    issued_at: int,
    state_digest: str,
    terms: OffchainTerms,
    deadline: int,
) -> dict[str, Any]:
    """Body of a ``dependent_state_binding_receipt`` for a source settlement (a payment, a
    job): the dependent state's digest bound to the source, its ref and the deadline.

    ``subject`` has chain id :data:`OFFCHAIN_CHAIN_ID` and ``tx_hash`` = :func:`ref_hash` of
    the ref, like the source's decision receipts; a source has no depth, so the terms are
    the registration instant, the timeout and the deadline."""
    return {
        **subject.head(BINDING, issued_at),
        "binding": {
            "dependent_state_digest": state_digest,
            "timeout_ms": terms.timeout_ms,
            "initiated_at": terms.initiated_at,
            "deadline": deadline,
        },
        "offchain": {
            "type": "offchain",
            "source_kind": terms.source_kind,
            "source": terms.source,
            "ref": terms.ref,
        },
    }
