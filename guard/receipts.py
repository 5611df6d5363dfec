"""The signed receipt format (version 1): its kinds, its fields, and how a body is sealed.

A receipt is one JSON object. All of it but the two trailer fields is the **body**; the
trailer is ``digest`` (``sha256:`` + SHA-256 of the body's canonical JSON, its stable id)
and ``signature`` (65 bytes r || s || v, EIP-712 over :mod:`guard.eip712`'s message, whose
``bodyHash`` is keccak256 of the same canonical JSON). docs/receipts.md documents every
field; :mod:`guard.verify` checks them. Every body has:

``version`` (1), ``kind``, ``settlement_id``, ``chain`` (the watcher's name for it),
``chain_id``, ``tx_hash`` (the watched tx), ``issued_at`` (ms), ``signer`` (0x address).

Kinds:

``settlement_finality_receipt``
    the tx is in a block at depth >= N (headers + receipt and tx proofs; status 1).
``settlement_failure_receipt``
    the tx reverted (the same proofs, status 0), or another tx from the same sender with the
    same nonce is at depth >= N (its proofs, plus the watched tx's own signed bytes).
``async_settlement_timeout_signature``
    the deadline passed without finality: deadline, policy, head block at the deadline, last
    observation.
``dependent_state_binding_receipt``
    at registration: binds the digest of the dependent state to the settlement's terms.
``receipt_revocation``
    withdraws an earlier receipt (by digest), saying why (a finality violation).

A decision of a payment or job *source* (Stripe, RQ, Celery: :mod:`guard.source`) is signed as
one of the same three decision kinds, with ``chain_id`` 0, ``tx_hash`` = keccak256 of the
source's reference, and an ``offchain`` section instead of ``finality`` and ``proof``
(:func:`offchain_body`; checked by :mod:`guard.verify_offchain`).

Builders here are pure: the caller (watcher/receipts.py) fetches headers and proofs, this
module puts them in their place, the signer signs :func:`message_hash`, :func:`seal` adds
the trailer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guard import eip712
from guard.canonical import canonical_json, digest
from guard.hashing import keccak256
from guard.header_chain import encode_header_chain
from guard.source import objects_digest

FORMAT_VERSION = 1
"""The ``version`` of every receipt this code writes and the only one it verifies."""

FINALITY = "settlement_finality_receipt"
FAILURE = "settlement_failure_receipt"
TIMEOUT = "async_settlement_timeout_signature"
BINDING = "dependent_state_binding_receipt"
REVOCATION = "receipt_revocation"

DECISION_KINDS = (FINALITY, FAILURE, TIMEOUT)
"""Kinds that attest a terminal verdict (one current receipt per decision)."""
KINDS = (*DECISION_KINDS, BINDING, REVOCATION)
"""Every kind of receipt."""
TRAILER = ("digest", "signature")
"""The receipt's fields that are not part of the signed body."""

OFFCHAIN_CHAIN_ID = 0
"""The ``chain_id`` of every receipt about a source settlement (no chain id is 0)."""
OFFCHAIN_BOOKKEEPING = ("source", "source_kind", "ref", "event_ids", "objects", "objects_digest")
"""Evidence facts that are not the source's objects (used when the evidence has no
``objects`` map of its own: the remaining facts *are* the recorded objects)."""
VERDICT_KIND = {
    "FINALITY_CONFIRMED": FINALITY,
    "SETTLEMENT_FAILED": FAILURE,
    "TIMEOUT_TREATED_AS_FAILURE": TIMEOUT,
}
"""The receipt kind attesting each terminal verdict."""

FINALIZED_CLAIM = (
    "finalized_number is the claim of the observing node(s) (their `finalized` block tag), "
    "not proven by this receipt; the headers prove only the depth they cover"
)
"""The plain statement a receipt with basis ``finalized`` carries."""

SAFE_CLAIM = (
    "safe_number is the claim of the observing node(s) (their `safe` block tag), "
    "not proven by this receipt; the headers prove only the depth they cover"
)
"""The plain statement a receipt with basis ``safe`` carries."""

CLAIM_OF_BASIS = {
    "finalized": FINALIZED_CLAIM,
    "depth_and_finalized": FINALIZED_CLAIM,
    "safe": SAFE_CLAIM,
}
"""The statement each tag-based basis carries (``depth`` carries none: the headers prove it)."""


def body_of(receipt: Mapping[str, Any]) -> dict[str, Any]:
    """The signed part of a receipt: everything but the trailer."""
    return {k: v for k, v in receipt.items() if k not in TRAILER}


def body_digest(body: Mapping[str, Any]) -> str:
    """``sha256:``… of the body's canonical JSON: the receipt's id (revocations cite it)."""
    return digest(body)


def message_hash(body: Mapping[str, Any]) -> bytes:
    """The EIP-712 digest the signature signs (raises CanonicalError, KeyError, ValueError on
    a body without the common fields)."""
    return body_hashes(body)[1]


def body_hashes(body: Mapping[str, Any]) -> tuple[str, bytes]:
    """(the body's ``sha256:`` digest, the EIP-712 digest signed over it), from one pass of
    canonical encoding (the verifier needs both)."""
    data = canonical_json(body)
    signed = eip712.signing_hash(
        kind=str(body["kind"]),
        chain_id=int(body["chain_id"]),
        tx_hash=bytes.fromhex(str(body["tx_hash"])[2:]),
        settlement_id=str(body["settlement_id"]),
        issued_at=int(body["issued_at"]),
        body_hash=keccak256(data),
    )
    return "sha256:" + hashlib.sha256(data).hexdigest(), signed


def typed_data(body: Mapping[str, Any]) -> dict[str, Any]:
    """The EIP-712 JSON document of a body (for signers such as eth-account or a wallet)."""
    return eip712.typed_data(
        kind=str(body["kind"]),
        chain_id=int(body["chain_id"]),
        tx_hash=str(body["tx_hash"]),
        settlement_id=str(body["settlement_id"]),
        issued_at=int(body["issued_at"]),
        body_hash="0x" + keccak256(canonical_json(body)).hex(),
    )


def seal(body: Mapping[str, Any], signature: str) -> dict[str, Any]:
    """The receipt: ``body`` plus its digest and the signature (0x hex of 65 bytes)."""
    return {**body, "digest": body_digest(body), "signature": signature}


@dataclass(frozen=True)
class Subject:
    """Who the receipt is about and who signs it: the fields every body starts with."""

    settlement_id: str
    """The watcher's settlement id."""
    chain: str
    """The watcher's name for the chain."""
    chain_id: int
    """EIP-155 chain id."""
    tx_hash: str
    """The watched transaction (0x lower case)."""
    signer: str
    """0x lower-case address of the signing key."""

    def head(self, kind: str, issued_at: int) -> dict[str, Any]:
        """The common fields of a body of ``kind`` issued at ``issued_at`` (ms)."""
        return {
            "version": FORMAT_VERSION,
            "kind": kind,
            "settlement_id": self.settlement_id,
            "chain": self.chain,
            "chain_id": self.chain_id,
            "tx_hash": self.tx_hash,
            "issued_at": issued_at,
            "signer": self.signer,
        }


@dataclass(frozen=True)
class InclusionProof:
    """A tx in a block and the blocks above it: everything a verifier recomputes."""

    headers: Sequence[Mapping[str, str]]
    """Header objects (:func:`guard.headers.header_json`), the inclusion block first, each
    the parent of the next, up to the confirming head."""
    tx_index: int
    """Position of the tx in the inclusion block (the trie key is rlp(tx_index))."""
    receipt_proof: Sequence[str]
    """Trie nodes (0x hex RLP) from ``receiptsRoot`` to the tx's receipt."""
    transaction_proof: Sequence[str]
    """Trie nodes from ``transactionsRoot`` to the signed tx, in the form the chain used."""
    compact_headers: bool = False
    """Carry the headers as ``header_chain`` (guard/header_chain.py, about a third of the
    size) instead of the ``headers`` list; verifiers before it know only ``headers``."""

    def as_json(self) -> dict[str, Any]:
        """The ``proof`` object of a body."""
        if self.compact_headers:
            chain: dict[str, Any] = {"header_chain": encode_header_chain(self.headers)}
        else:
            chain = {"headers": [dict(h) for h in self.headers]}
        return {
            "tx_index": self.tx_index,
            **chain,
            "receipt_proof": list(self.receipt_proof),
            "transaction_proof": list(self.transaction_proof),
        }


@dataclass(frozen=True)
class FinalityBasis:
    """Why the evidence counts as final."""

    basis: str
    """One of :data:`guard.finality_rule.BASES`: ``depth`` (the headers show depth >= N),
    ``finalized`` or ``safe`` (the node's tag covered it), ``depth_and_finalized`` (both)."""
    required_confirmations: int
    """N."""
    finalized_number: int | None
    """The node's ``finalized`` height (bases ``finalized``, ``depth_and_finalized``)."""
    observed_by: Sequence[str]
    """The RPC endpoints (credentials removed) that observed it."""
    safe_number: int | None = None
    """The node's ``safe`` height (basis ``safe``), else None."""

    def as_json(self, confirmations: int) -> dict[str, Any]:
        """The ``finality`` object of a body; ``confirmations`` is the headers' depth (or,
        in an attestation, the depth the signer saw). ``safe_number`` appears only with
        basis ``safe``, so receipts of the other bases keep their exact form."""
        out: dict[str, Any] = {
            "basis": self.basis,
            "required_confirmations": self.required_confirmations,
            "confirmations": confirmations,
            "finalized_number": self.finalized_number,
            "claim": CLAIM_OF_BASIS.get(self.basis),
            "observed_by": list(self.observed_by),
        }
        if self.basis == "safe":
            out["safe_number"] = self.safe_number
        return out


def _decided(decision: Mapping[str, Any], dependent_state_digest: str | None) -> dict[str, Any]:
    return {
        "verdict": decision["verdict"],
        "decision_digest": decision["digest"],
        "evidence": decision.get("evidence"),
        "dependent_state_digest": dependent_state_digest,
    }


def finality_body(
    subject: Subject,
    issued_at: int,
    decision: Mapping[str, Any],
    proof: InclusionProof,
    basis: FinalityBasis,
    dependent_state_digest: str | None,
) -> dict[str, Any]:
    """Body of a ``settlement_finality_receipt`` for a FINALITY_CONFIRMED ``decision``."""
    return {
        **subject.head(FINALITY, issued_at),
        **_decided(decision, dependent_state_digest),
        "finality": basis.as_json(len(proof.headers)),
        "proof": proof.as_json(),
    }


def reverted_body(
    subject: Subject,
    issued_at: int,
    decision: Mapping[str, Any],
    proof: InclusionProof,
    basis: FinalityBasis,
    dependent_state_digest: str | None,
) -> dict[str, Any]:
    """Body of a ``settlement_failure_receipt``: the watched tx's receipt has status 0."""
    return {
        **subject.head(FAILURE, issued_at),
        **_decided(decision, dependent_state_digest),
        "failure": {"reason": "reverted"},
        "finality": basis.as_json(len(proof.headers)),
        "proof": proof.as_json(),
    }


def replaced_body(
    subject: Subject,
    issued_at: int,
    decision: Mapping[str, Any],
    proof: InclusionProof,
    basis: FinalityBasis,
    dependent_state_digest: str | None,
    replaced_by: str,
    watched_raw_tx: str | None,
) -> dict[str, Any]:
    """Body of a ``settlement_failure_receipt``: ``replaced_by`` (proved by ``proof``) used
    the watched tx's sender and nonce, which ``watched_raw_tx`` (its signed bytes, recorded
    while pending) proves; without them that link is the signer's claim."""
    return {
        **subject.head(FAILURE, issued_at),
        **_decided(decision, dependent_state_digest),
        "failure": {
            "reason": "replaced",
            "replaced_by": replaced_by,
            "watched_raw_tx": watched_raw_tx,
        },
        "finality": basis.as_json(len(proof.headers)),
        "proof": proof.as_json(),
    }


@dataclass(frozen=True)
class TimeoutTerms:
    """The policy a timeout came from and when it struck."""

    initiated_at: int
    """Registration instant (ms); the wait runs from here."""
    timeout_ms: int
    """The settlement's own timeout."""
    max_wait_ms: int
    """The policy's ceiling on any wait."""
    deadline: int
    """initiated_at + min(timeout_ms, max_wait_ms)."""
    decided_at: int
    """When the watcher decided the timeout (ms, >= deadline)."""


def timeout_body(
    subject: Subject,
    issued_at: int,
    decision: Mapping[str, Any],
    terms: TimeoutTerms,
    head_at_deadline: Mapping[str, str] | None,
    next_header: Mapping[str, str] | None,
    observed_by: Sequence[str],
    dependent_state_digest: str | None,
) -> dict[str, Any]:
    """Body of an ``async_settlement_timeout_signature``.

    ``head_at_deadline`` is the last block with ``timestamp * 1000 <= deadline`` and
    ``next_header`` its child (``timestamp * 1000 > deadline``), when one exists: together
    they show which block was the chain's head at the deadline. The decision's evidence is
    the last observation of the settlement.
    """
    return {
        **subject.head(TIMEOUT, issued_at),
        **_decided(decision, dependent_state_digest),
        "late_finality": decision.get("late_finality"),
        "timeout": {
            "initiated_at": terms.initiated_at,
            "timeout_ms": terms.timeout_ms,
            "max_wait_ms": terms.max_wait_ms,
            "deadline": terms.deadline,
            "decided_at": terms.decided_at,
            "observed_by": list(observed_by),
        },
        "proof": {
            "head_at_deadline": None if head_at_deadline is None else dict(head_at_deadline),
            "next_header": None if next_header is None else dict(next_header),
        },
    }


@dataclass(frozen=True)
class BindingTerms:
    """What a registration bound the dependent state to."""

    dependent_state_digest: str
    """``sha256:`` digest of the dependent state's canonical JSON."""
    required_confirmations: int
    """N."""
    finality_mode: str
    """One of :data:`guard.finality_rule.FINALITY_MODES`."""
    timeout_ms: int
    """The settlement's timeout."""
    initiated_at: int
    """Registration instant (ms)."""
    deadline: int
    """When waiting ends (ms)."""


def binding_body(subject: Subject, issued_at: int, terms: BindingTerms) -> dict[str, Any]:
    """Body of a ``dependent_state_binding_receipt``."""
    return {
        **subject.head(BINDING, issued_at),
        "binding": {
            "dependent_state_digest": terms.dependent_state_digest,
            "required_confirmations": terms.required_confirmations,
            "finality_mode": terms.finality_mode,
            "timeout_ms": terms.timeout_ms,
            "initiated_at": terms.initiated_at,
            "deadline": terms.deadline,
        },
    }


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


def revocation_body(
    subject: Subject,
    issued_at: int,
    revoked: Mapping[str, Any],
    reason: str,
    evidence: Mapping[str, Any],
) -> dict[str, Any]:
    """Body of a ``receipt_revocation`` withdrawing the receipt ``revoked``."""
    return {
        **subject.head(REVOCATION, issued_at),
        "revokes": {
            "digest": revoked["digest"],
            "kind": revoked["kind"],
            "issued_at": revoked["issued_at"],
            "signer": revoked["signer"],
        },
        "reason": reason,
        "evidence": dict(evidence),
    }


# -- off-chain sources -----------------------------------------------------------------------


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
    body = {**subject.head(kind, issued_at), **_decided(decision, dependent_state_digest)}
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
