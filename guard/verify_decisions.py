"""Decision receipts with a block behind them: finality and failure (reverted, replaced).

Both carry an inclusion proof (:func:`guard.verify_chain.verify_inclusion`) and a
``finality`` object saying why that evidence is final: depth (the headers show >= N) or the
node's ``finalized`` tag (a claim, said so in the receipt). A finality receipt proves the
watched tx with status 1; a failure proves it with status 0 (``reverted``), or proves another
tx that used the watched tx's sender and nonce (``replaced``), the link shown by recovering
both signers from their signed bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guard import receipts as fmt
from guard.attestation import FORM, attestation_claim, attested_inclusion
from guard.errors import ReceiptInvalid
from guard.evidence_facts import evidence_facts, hold, hold_head, hold_terms, required, state_rest
from guard.fields import (
    child,
    digest_text,
    field,
    hash32,
    hex_bytes,
    integer,
    keys,
    obj,
    optional_integer,
    text,
)
from guard.finality_rule import TAG_OF_BASIS
from guard.payment_proof import verify_payment
from guard.txs import SignedTx, TransactionError, decode_signed
from guard.verify_chain import ChainFacts, Inclusion, verify_inclusion
from guard.verify_consensus import SECTION, UNCHECKED_CLAIM, check_section_shape
from guard.verify_deposit import verify_reorged_out
from guard.verify_offchain import verify_offchain
from guard.verify_terms import COMMON, DECIDED, finality_terms, verify_timeout

VERDICTS = {kind: verdict for verdict, kind in fmt.VERDICT_KIND.items()}
"""The verdict each decision receipt kind attests (the inverse of ``VERDICT_KIND``)."""


def verify_decision(kind: str, body: Mapping[str, Any]) -> tuple[ChainFacts, list[str]]:
    """Finality, failure and timeout receipts."""
    verdict = text(body, "verdict", "")
    if verdict != VERDICTS[kind]:
        raise ReceiptInvalid(f"verdict: {verdict} does not go with a {kind}")
    digest_text(body, "decision_digest", "")
    state = digest_text(body, "dependent_state_digest", "", nullable=True)
    evidence = field(body, "evidence", "")
    if evidence is not None:
        obj(evidence, "evidence")
    if "offchain" in body:
        return verify_offchain(kind, body, state)
    if "payment" in body and kind == fmt.FAILURE:  # a deposit reorged out
        return verify_reorged_out(body, state)
    if "payment" in body:  # a payment to an address (guard/payment_proof.py)
        return verify_payment(kind, body, state)
    if integer(body, "chain_id", "") == fmt.OFFCHAIN_CHAIN_ID:
        raise ReceiptInvalid(
            "chain_id: 0 is for off-chain receipts, which have an offchain section"
        )
    if kind == fmt.TIMEOUT:
        return verify_timeout(body, state)
    extra = ("failure",) if kind == fmt.FAILURE else ()
    attested = "attestation_only" in body
    if attested:  # a chain whose headers do not re-hash (guard.attestation)
        extra = (*extra, "attestation_only", "attestation")
    if kind == fmt.FINALITY and SECTION in body:
        extra = (*extra, SECTION)
    keys(body, (*COMMON, *DECIDED, "finality", "proof", *extra), "")
    claims: list[str] = []
    if SECTION in body:
        claims.append(UNCHECKED_CLAIM.format(checkpoint=check_section_shape(body)))
    if attested:
        inclusion, why = attested_inclusion(body)
        claims.append(attestation_claim(why))
    else:
        inclusion = verify_inclusion(child(body, "proof", ""))
    reason, replacing = _verify_outcome(kind, body, inclusion, claims)
    finality = child(body, "finality", "")
    basis = _verify_basis(finality, inclusion, claims)
    _cross_check(body, finality, inclusion, reason or basis, replacing, claims)
    return (
        ChainFacts(
            summary=_summary(inclusion, reason, basis, attested),
            block_number=inclusion.block_number,
            block_hash=inclusion.block_hash,
            tx_index=inclusion.tx_index,
            status=inclusion.status,
            confirmations=inclusion.depth,
            transaction_form=inclusion.form,
            ancestry=inclusion.ancestry,
            anchor=(inclusion.head_number, inclusion.head_hash),
            dependent_state_digest=state,
        ),
        claims,
    )


def _summary(inclusion: Inclusion, reason: str | None, basis: str, attested: bool) -> str:
    """The one line a person reads: where the tx is, how deep, and on what basis."""
    status = "success" if inclusion.status else "reverted"
    what = f"replaced by {inclusion.tx_hash}, " if reason == "replaced" else ""
    return ("ATTESTATION ONLY, no header chain checked: " if attested else "") + (
        f"{what}block {inclusion.block_number} ({inclusion.block_hash}), tx {inclusion.tx_index}, "
        f"{status}, depth {inclusion.depth} (head {inclusion.head_number}"
        + (f", ancestry {inclusion.ancestry}" if inclusion.ancestry else "")
        + f"), basis {basis}"
    )


def _verify_outcome(
    kind: str, body: Mapping[str, Any], inclusion: Inclusion, claims: list[str]
) -> tuple[str | None, SignedTx | None]:
    """Check that the proven tx and its status are what the kind says: the watched tx with
    status 1 (finality), with status 0 (``reverted``), or another tx with its sender and
    nonce (``replaced``, claims appended to ``claims``). Returns the failure reason (None
    for finality) and, for a replacement decoded from its proven bytes, the replacing tx."""
    if kind == fmt.FINALITY:
        _expect_tx(inclusion, text(body, "tx_hash", ""), "the watched tx")
        if inclusion.status != 1:
            raise ReceiptInvalid(f"receipt proof: status is {inclusion.status}, not 1 (success)")
        return None, None
    failure = child(body, "failure", "")
    reason = text(failure, "reason", "failure")
    replacing = None
    if reason == "reverted":
        keys(failure, ("reason",), "failure")
        _expect_tx(inclusion, text(body, "tx_hash", ""), "the watched tx")
        if inclusion.status != 0:
            raise ReceiptInvalid(f"receipt proof: status is {inclusion.status}, not 0 (reverted)")
    elif reason == "replaced":
        said, replacing = _verify_replacement(body, failure, inclusion)
        claims += said
    else:
        raise ReceiptInvalid(f"failure.reason: {reason!r} is not 'reverted' or 'replaced'")
    return reason, replacing


def _expect_tx(inclusion: Inclusion, tx_hash: str, what: str) -> None:
    if inclusion.tx_hash != tx_hash:
        raise ReceiptInvalid(
            f"transaction proof: the proven tx is {inclusion.tx_hash}, not {what} {tx_hash}"
        )


def _verify_replacement(
    body: Mapping[str, Any], failure: Mapping[str, Any], inclusion: Inclusion
) -> tuple[list[str], SignedTx | None]:
    """The replacing tx is proven; it must share sender and nonce with the watched tx.
    Returns the claims and the replacing tx decoded from its proven bytes (None for an
    attestation, which carries no bytes)."""
    keys(failure, ("reason", "replaced_by", "watched_raw_tx"), "failure")
    watched = text(body, "tx_hash", "")
    replaced_by = hash32(failure, "replaced_by", "failure")
    _expect_tx(inclusion, replaced_by, "the replacing tx")
    if replaced_by == watched:
        raise ReceiptInvalid("failure.replaced_by: is the watched tx itself")
    if inclusion.form == FORM:
        return [f"{replaced_by} replaced the watched tx {watched}: the signer's claim"], None
    try:
        replacing = decode_signed(inclusion.tx_bytes)
    except TransactionError as exc:
        raise ReceiptInvalid(f"transaction proof: cannot recover the sender: {exc}") from exc
    if replacing.nonce is None:  # an L2 system/deposit tx: it consumes no nonce it states
        raise ReceiptInvalid(
            f"transaction proof: a type 0x{replacing.tx_type:02x} tx replaces none"
        )
    raw = field(failure, "watched_raw_tx", "failure")
    if raw is None:
        return [
            f"the watched tx {watched} was sent by {replacing.sender} with nonce "
            f"{replacing.nonce}: the signer's claim (its signed bytes were not recorded)"
        ], replacing
    try:
        own: SignedTx = decode_signed(hex_bytes(raw, "failure.watched_raw_tx"))
    except TransactionError as exc:
        raise ReceiptInvalid(f"failure.watched_raw_tx: {exc}") from exc
    if own.tx_hash != watched:
        raise ReceiptInvalid(f"failure.watched_raw_tx: hashes to {own.tx_hash}, not {watched}")
    if (own.sender, own.nonce) != (replacing.sender, replacing.nonce):
        raise ReceiptInvalid(
            f"failure: the watched tx is ({own.sender}, nonce {own.nonce}) but the replacing tx "
            f"is ({replacing.sender}, nonce {replacing.nonce})"
        )
    return [], replacing


def _verify_basis(finality: Mapping[str, Any], inclusion: Inclusion, claims: list[str]) -> str:
    basis, required, confirmations = finality_terms(finality)
    finalized = optional_integer(finality, "finalized_number", "finality")
    if basis in ("depth", "depth_and_finalized") and inclusion.depth < required:
        raise ReceiptInvalid(
            f"finality: the headers show depth {inclusion.depth}, below the required {required}"
        )
    if confirmations != inclusion.depth:
        raise ReceiptInvalid(
            f"finality.confirmations: {confirmations} is not the depth the headers show "
            f"({inclusion.depth})"
        )
    tag = TAG_OF_BASIS.get(basis)
    if tag is None:
        return basis
    height = (
        finalized if tag == "finalized" else optional_integer(finality, "safe_number", "finality")
    )
    if height is None or height < inclusion.block_number:
        raise ReceiptInvalid(
            f"finality.{tag}_number: {height} does not cover block {inclusion.block_number}"
        )
    if field(finality, "claim", "finality") != fmt.CLAIM_OF_BASIS[basis]:
        raise ReceiptInvalid(f"finality.claim: must state that {tag} is the node's claim")
    claims.append(
        f"block {inclusion.block_number} is at or below the node's {tag} block "
        f"{height}: the observing node's claim"
    )
    return basis


def _cross_check(
    body: Mapping[str, Any],
    finality: Mapping[str, Any],
    inclusion: Inclusion,
    kind: str,
    replacing: SignedTx | None,
    claims: list[str],
) -> None:
    """Every fact of the decision's evidence is what the proofs show (the block, the tx,
    its index and status, the head, a replacement's sender and nonce), restates the
    receipt's terms, or is said to be the signer's word (:mod:`guard.evidence_facts`)."""
    facts = evidence_facts(body.get("evidence"), kind)
    required(facts, ("block_number", "block_hash"))
    block = {"block_number": inclusion.block_number, "block_hash": inclusion.block_hash}
    checked = hold(facts, block, "the proven block's")
    tx: dict[str, object] = {"tx_hash": body.get("tx_hash")}
    if kind == "replaced":
        tx["replaced_by"] = inclusion.tx_hash
        if replacing is not None:
            tx.update(sender=replacing.sender, nonce=replacing.nonce)
    else:
        tx.update(tx_index=inclusion.tx_index, status=inclusion.status)
    checked += hold(facts, tx, "the proven tx's")
    hashes = {
        inclusion.block_number: inclusion.block_hash,
        inclusion.head_number: inclusion.head_hash,
    }
    checked += hold_head(facts, inclusion.block_number, hashes, claims)
    checked += hold_terms(facts, body, finality)
    state_rest(facts, checked, claims)
