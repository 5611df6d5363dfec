"""Receipts whose evidence is terms more than blocks: timeouts, bindings, revocations.

A timeout signature proves its arithmetic (deadline = initiated_at + min(timeout_ms,
max_wait_ms)) and, with two linked headers around the deadline, which block was the head
then. A binding's terms must be consistent; a revocation must name what it revokes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guard import receipts as fmt
from guard.errors import ReceiptInvalid
from guard.fields import address, child, digest_text, field, integer, keys, obj, strings, text
from guard.finality_rule import BASES, FINALITY_MODES
from guard.headers import field_bytes
from guard.verify_chain import ChainFacts, verify_headers

COMMON = (
    "version",
    "kind",
    "settlement_id",
    "chain",
    "chain_id",
    "tx_hash",
    "issued_at",
    "signer",
)
"""Fields of every body."""
DECIDED = ("verdict", "decision_digest", "evidence", "dependent_state_digest")
"""Fields of every decision body."""


def verify_timeout(body: Mapping[str, Any], state: str | None) -> tuple[ChainFacts, list[str]]:
    """An ``async_settlement_timeout_signature`` (``state``: its dependent-state digest)."""
    keys(body, (*COMMON, *DECIDED, "late_finality", "timeout", "proof"), "")
    deadline = timeout_terms(body)
    late = field(body, "late_finality", "")
    if late is not None:
        obj(late, "late_finality")
    claims: list[str] = []
    anchor, where = head_at_deadline(child(body, "proof", ""), deadline, claims)
    evidence = field(body, "evidence", "")
    if evidence is not None:  # the last progress before the deadline: nothing proves it here
        kind = obj(evidence, "evidence").get("kind")
        claims.append(
            f"evidence ({kind!r}, the last observation before the deadline): the decision's "
            "record, not checked against the proofs"
        )
    late_note = "; finality observed late: reconcile" if late is not None else ""
    return (
        ChainFacts(
            summary=f"deadline {deadline} ms, {where}{late_note}",
            anchor=anchor,
            dependent_state_digest=state,
        ),
        claims,
    )


def timeout_terms(body: Mapping[str, Any]) -> int:
    """The ``timeout`` section of a body whose verdict rests on a deadline, its arithmetic
    checked (deadline = initiated_at + min(timeout_ms, max_wait_ms); decided and issued at
    or after it); returns the deadline."""
    terms = child(body, "timeout", "")
    keys(
        terms,
        ("initiated_at", "timeout_ms", "max_wait_ms", "deadline", "decided_at", "observed_by"),
        "timeout",
    )
    initiated = integer(terms, "initiated_at", "timeout")
    timeout_ms = integer(terms, "timeout_ms", "timeout", minimum=1)
    max_wait = integer(terms, "max_wait_ms", "timeout", minimum=1)
    deadline = integer(terms, "deadline", "timeout")
    decided = integer(terms, "decided_at", "timeout")
    strings(terms, "observed_by", "timeout", min_length=1)
    if deadline != initiated + min(timeout_ms, max_wait):
        raise ReceiptInvalid(
            f"timeout.deadline: {deadline} is not initiated_at + min(timeout_ms, max_wait_ms) "
            f"= {initiated + min(timeout_ms, max_wait)}"
        )
    if decided < deadline:
        raise ReceiptInvalid(f"timeout.decided_at: {decided} is before the deadline {deadline}")
    if integer(body, "issued_at", "") < deadline:
        raise ReceiptInvalid(f"issued_at: is before the deadline {deadline}")
    return deadline


def head_at_deadline(
    proof: Mapping[str, Any], deadline: int, claims: list[str]
) -> tuple[tuple[int, str] | None, str]:
    """(anchor block, words for the summary) of a timeout's ``proof``: the head at the
    deadline (timestamp at or before it) and, when given, its child (timestamp after it),
    linked. What is only the signer's word is appended to ``claims``."""
    keys(proof, ("head_at_deadline", "next_header"), "proof")
    head, below = field(proof, "head_at_deadline", "proof"), field(proof, "next_header", "proof")
    anchor: tuple[int, str] | None = None
    if head is None:
        if below is not None:
            raise ReceiptInvalid("proof.next_header: given without proof.head_at_deadline")
        claims.append("the chain's head at the deadline is not stated")
        where = "head at the deadline not stated"
    else:
        headers = verify_headers([head] if below is None else [head, below], "proof")
        number, block_hash, header = headers[0]
        if _timestamp(header) * 1000 > deadline:
            raise ReceiptInvalid(f"header {number}: timestamp is after the deadline {deadline}")
        anchor = (number, block_hash)
        if below is None:
            claims.append(
                f"block {number} was still the head at the deadline: the signer's claim "
                "(no later block was known when this was signed)"
            )
        else:
            next_number, next_hash, next_header = headers[1]
            if _timestamp(next_header) * 1000 <= deadline:
                raise ReceiptInvalid(
                    f"header {next_number}: timestamp is not after the deadline {deadline}"
                )
            anchor = (next_number, next_hash)
        where = f"head at the deadline block {number} ({block_hash})"
    return anchor, where


def _timestamp(header: Mapping[str, Any]) -> int:
    return int.from_bytes(field_bytes("timestamp", "q", header["timestamp"]), "big")


def offchain_subject(body: Mapping[str, Any], off: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(source_kind, source, ref)`` of an off-chain receipt's ``offchain`` section, checked
    against the common fields: ``chain`` is the source, ``tx_hash`` is keccak256 of the ref."""
    if field(off, "type", "offchain") != "offchain":
        raise ReceiptInvalid(f"offchain.type: {off.get('type')!r} is not 'offchain'")
    source_kind = text(off, "source_kind", "offchain")
    source = text(off, "source", "offchain")
    ref = text(off, "ref", "offchain")
    if text(body, "chain", "") != source:
        raise ReceiptInvalid(f"chain: {body.get('chain')!r} is not offchain.source {source!r}")
    if text(body, "tx_hash", "") != fmt.ref_hash(ref):
        raise ReceiptInvalid(
            f"tx_hash: is not keccak256 of offchain.ref {ref!r} ({fmt.ref_hash(ref)})"
        )
    return source_kind, source, ref


def _binding_deadline(terms: Mapping[str, Any]) -> int:
    """A binding's deadline, which must lie in ``(initiated_at, initiated_at + timeout_ms]``."""
    timeout_ms = integer(terms, "timeout_ms", "binding", minimum=1)
    initiated = integer(terms, "initiated_at", "binding")
    deadline = integer(terms, "deadline", "binding")
    if not initiated < deadline <= initiated + timeout_ms:
        raise ReceiptInvalid(
            f"binding.deadline: {deadline} is not within initiated_at + timeout_ms"
        )
    return deadline


def verify_offchain_binding(body: Mapping[str, Any]) -> tuple[ChainFacts, list[str]]:
    """A source settlement's binding receipt: consistent terms, and a ``tx_hash`` that is
    keccak256 of the ref it names."""
    if "offchain" not in body:
        raise ReceiptInvalid(
            f"chain_id: {fmt.OFFCHAIN_CHAIN_ID} marks an off-chain binding, but the receipt "
            "has no offchain section"
        )
    keys(body, (*COMMON, "binding", "offchain"), "")
    terms = child(body, "binding", "")
    keys(terms, ("dependent_state_digest", "timeout_ms", "initiated_at", "deadline"), "binding")
    off = child(body, "offchain", "")
    keys(off, ("type", "source_kind", "source", "ref"), "offchain")
    source_kind, source, ref = offchain_subject(body, off)
    state = digest_text(terms, "dependent_state_digest", "binding")
    deadline = _binding_deadline(terms)
    return (
        ChainFacts(
            summary=(
                f"binds dependent state {state} to {source_kind} {ref!r} of {source!r}, "
                f"deadline {deadline}"
            ),
            dependent_state_digest=state,
        ),
        [],
    )


def verify_binding(body: Mapping[str, Any]) -> tuple[ChainFacts, list[str]]:
    """A binding receipt's terms are consistent."""
    keys(body, (*COMMON, "binding"), "")
    terms = child(body, "binding", "")
    keys(
        terms,
        (
            "dependent_state_digest",
            "required_confirmations",
            "finality_mode",
            "timeout_ms",
            "initiated_at",
            "deadline",
        ),
        "binding",
    )
    state = digest_text(terms, "dependent_state_digest", "binding")
    required = integer(terms, "required_confirmations", "binding", minimum=1)
    mode = text(terms, "finality_mode", "binding")
    if mode not in FINALITY_MODES:
        raise ReceiptInvalid(f"binding.finality_mode: {mode!r} is not one of {FINALITY_MODES}")
    deadline = _binding_deadline(terms)
    return (
        ChainFacts(
            summary=f"binds dependent state {state} to N={required} ({mode}), deadline {deadline}",
            dependent_state_digest=state,
        ),
        [],
    )


def verify_revocation(body: Mapping[str, Any]) -> tuple[ChainFacts, list[str]]:
    """A revocation names the receipt it withdraws and why."""
    keys(body, (*COMMON, "revokes", "reason", "evidence"), "")
    revokes = child(body, "revokes", "")
    keys(revokes, ("digest", "kind", "issued_at", "signer"), "revokes")
    revoked = digest_text(revokes, "digest", "revokes")
    kind = text(revokes, "kind", "revokes")
    if kind not in fmt.KINDS or kind == fmt.REVOCATION:
        raise ReceiptInvalid(f"revokes.kind: {kind!r} is not a revocable receipt kind")
    integer(revokes, "issued_at", "revokes")
    address(revokes, "signer", "revokes")
    reason = text(body, "reason", "")
    child(body, "evidence", "")
    return ChainFacts(summary=f"revokes {kind} {revoked}: {reason}", revokes=revoked), []


def finality_terms(finality: Mapping[str, Any]) -> tuple[str, int, int]:
    """The ``finality`` section's shape, shared by tx and payment receipts: its keys, a
    known basis, observers named; returns (basis, required confirmations, confirmations)."""
    basis = text(finality, "basis", "finality")
    tagged = ("safe_number",) if basis == "safe" else ()
    keys(
        finality,
        (
            "basis",
            "required_confirmations",
            "confirmations",
            "finalized_number",
            "claim",
            "observed_by",
            *tagged,
        ),
        "finality",
    )
    required = integer(finality, "required_confirmations", "finality", minimum=1)
    confirmations = integer(finality, "confirmations", "finality", minimum=1)
    strings(finality, "observed_by", "finality", min_length=1)
    if basis not in BASES:
        raise ReceiptInvalid(f"finality.basis: {basis!r} is not one of {', '.join(BASES)}")
    return basis, required, confirmations
