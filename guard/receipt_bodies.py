"""Bodies of the receipts about a chain settlement: finality, failure (reverted or
replaced), timeout, binding and revocation.

Builders are pure: the caller (watcher/receipts/component.py) fetches headers and proofs, these put
them in their place (:class:`InclusionProof`, :class:`FinalityBasis`, the terms), and
:mod:`guard.receipt_format` seals the result. docs/receipts.md documents every field;
:mod:`guard.verify` checks them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guard.canonical import FrozenJson
from guard.header_chain import encode_header_chain, one_header_chain
from guard.headers import header_number
from guard.history import HEADER_CHAIN, HistoryProof
from guard.receipt_format import (
    BINDING,
    CLAIM_OF_BASIS,
    FAILURE,
    FINALITY,
    REVOCATION,
    TIMEOUT,
    Subject,
)


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
    """Carry the headers as ``header_chain`` (guard/header_chain.py, under half the
    size) instead of the ``headers`` list; verifiers before it know only ``headers``."""
    history: HistoryProof | None = None
    """The link to the confirming block H by the history contract (guard/history.py):
    ``headers`` then holds the inclusion block's header alone."""
    header_chain_reason: str | None = None
    """Without ``history``: why the header chain is the ancestry (one of
    :data:`guard.history.REASONS`), said in ``proof.ancestry``; None says nothing (the
    proof's form before that section)."""

    @property
    def depth(self) -> int:
        """H - B + 1: the number of headers, or the distance the history proof spans."""
        if self.history is None:
            return len(self.headers)
        return header_number(self.history.header) - header_number(self.headers[0]) + 1

    def as_json(self) -> dict[str, Any]:
        """The ``proof`` object of a body."""
        if self.compact_headers:
            chain: dict[str, Any] = {"header_chain": _header_chain(self.headers)}
        else:
            chain = {"headers": [_shared(h) for h in self.headers]}
        out = {
            "tx_index": self.tx_index,
            **chain,
            "receipt_proof": list(self.receipt_proof),
            "transaction_proof": list(self.transaction_proof),
        }
        if self.history is not None:
            out["ancestry"] = self.history.as_json()
        elif self.header_chain_reason is not None:
            out["ancestry"] = {"kind": HEADER_CHAIN, "reason": self.header_chain_reason}
        return out


def _header_chain(headers: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """The ``header_chain`` object of ``headers``; a block's frozen header alone (the proof
    of a history ancestry) is encoded once for every receipt of the block."""
    if len(headers) == 1:
        return one_header_chain(headers[0])
    return encode_header_chain(headers)


def _shared(header: Mapping[str, str]) -> Mapping[str, str]:
    """A block's frozen header object as it is (guard/canonical.py: its canonical text is
    encoded once for every receipt of the block, the bytes unchanged), else a plain dict."""
    return header if type(header) is FrozenJson else dict(header)


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


def decided(decision: Mapping[str, Any], dependent_state_digest: str | None) -> dict[str, Any]:
    """The decision fields every decision body carries (verdict, its digest and evidence)."""
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
        **decided(decision, dependent_state_digest),
        "finality": basis.as_json(proof.depth),
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
        **decided(decision, dependent_state_digest),
        "failure": {"reason": "reverted"},
        "finality": basis.as_json(proof.depth),
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
        **decided(decision, dependent_state_digest),
        "failure": {
            "reason": "replaced",
            "replaced_by": replaced_by,
            "watched_raw_tx": watched_raw_tx,
        },
        "finality": basis.as_json(proof.depth),
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

    def as_json(self, observed_by: Sequence[str]) -> dict[str, Any]:
        """The receipt's ``timeout`` section: these terms and who observed the chain (the
        timeout receipt and a reorged-out deposit's failure receipt state it alike)."""
        return {
            "initiated_at": self.initiated_at,
            "timeout_ms": self.timeout_ms,
            "max_wait_ms": self.max_wait_ms,
            "deadline": self.deadline,
            "decided_at": self.decided_at,
            "observed_by": list(observed_by),
        }


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
        **decided(decision, dependent_state_digest),
        "late_finality": decision.get("late_finality"),
        "timeout": terms.as_json(observed_by),
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
