"""A decision's evidence facts, held against what the receipt's proofs showed.

A chain decision receipt carries the decision it attests: ``evidence`` (its kind, and the
facts the daemon recorded: block, hash, tx, index, status, head, depth...). A reader takes
what a valid receipt says for proven, so every fact is one of three things:

* **proven**: equal (in type and value) to what the header chain and the trie proofs show:
  the block and its hash, the tx hash and index, the receipt's status, the head and depth
  when the head is in the proven header chain, a replacement's sender and nonce;
* **consistent**: equal to the receipt's own signed terms (``chain``, the ``finality``
  section's basis, required depth and tags; the finality rule allows the basis);
* **stated**: what neither can show (a head above the proven headers, which stop at the
  required depth; a fact this verifier does not know), returned as a claim, the signer's
  word, never as proof.

A fact of the wrong type is a reason naming it, never an exception.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from guard.errors import ReceiptInvalid
from guard.fields import field, hash32, integer, obj
from guard.finality_rule import BASES_OF_MODE

WHERE = "evidence.facts"


def evidence_facts(evidence: object, kind: str) -> Mapping[str, Any]:
    """The facts of a decision's ``evidence``, which must be a decision on ``kind``."""
    if not isinstance(evidence, Mapping):
        raise ReceiptInvalid("evidence: a decision receipt needs the decision's evidence")
    if evidence.get("kind") != kind:
        raise ReceiptInvalid(f"evidence.kind: {evidence.get('kind')!r} is not {kind!r}")
    return obj(field(evidence, "facts", "evidence"), WHERE)


def same(value: object, expected: object) -> bool:
    """Equal in JSON terms: ``true`` is not ``1``, ``1`` is not ``"1"``."""
    return type(value) is type(expected) and value == expected


def hold(facts: Mapping[str, Any], shown: Mapping[str, object], whose: str) -> list[str]:
    """Each fact named in ``shown`` that the evidence has must equal it (``whose`` says
    where the value comes from: ``the proven block's``); returns the names checked."""
    for key, value in shown.items():
        if key in facts and not same(facts[key], value):
            raise ReceiptInvalid(f"{WHERE}.{key}: {facts[key]!r} is not {whose} {value!r}")
    return [key for key in shown if key in facts]


def required(facts: Mapping[str, Any], names: Collection[str]) -> None:
    """The facts every decision of this kind records (a missing one is a reason)."""
    for name in names:
        field(facts, name, WHERE)


def hold_head(
    facts: Mapping[str, Any],
    block_number: int,
    hashes: Mapping[int, str],
    claims: list[str],
) -> list[str]:
    """``head_number``, ``head_hash`` and ``confirmations`` against the proven header chain
    (``hashes``: number to hash): a head inside it must be its block there; a head above it
    is the decision's view, stated as a claim (the headers stop at the required depth);
    below it, or below the block, is a contradiction. Returns the names checked."""
    if "head_number" not in facts:
        return []
    head = integer(facts, "head_number", WHERE)
    top = max(hashes)
    if head < block_number or head < top:
        raise ReceiptInvalid(
            f"{WHERE}.head_number: {head} is below the proven header chain ({min(hashes)}..{top})"
        )
    if "confirmations" in facts and integer(facts, "confirmations", WHERE) != (
        head - block_number + 1
    ):
        raise ReceiptInvalid(
            f"{WHERE}.confirmations: {facts['confirmations']} is not head - block + 1 "
            f"({head - block_number + 1})"
        )
    if "head_hash" in facts:
        head_hash = hash32(facts, "head_hash", WHERE)
        if head in hashes and head_hash != hashes[head]:
            raise ReceiptInvalid(
                f"{WHERE}.head_hash: {head_hash} is not the proven block {head} ({hashes[head]})"
            )
        if head not in hashes:
            claims.append(
                f"the decision saw head {head} ({head_hash}), above the proven headers "
                f"(up to {top}): the signer's word"
            )
    return ["head_number", "head_hash", "confirmations"]


def hold_terms(
    facts: Mapping[str, Any], body: Mapping[str, Any], finality: Mapping[str, Any]
) -> list[str]:
    """The facts that restate the receipt's own terms: the chain, the finality section's
    basis, required depth and tags, and a finality rule that allows the basis."""
    terms = {
        "chain": body.get("chain"),
        "basis": finality.get("basis"),
        "required_confirmations": finality.get("required_confirmations"),
    }
    for tag in ("finalized_number", "safe_number"):  # the tag the basis rests on, if any
        if finality.get(tag) is not None:
            terms[tag] = finality[tag]
    checked = hold(facts, terms, "the receipt's")
    if "finality_mode" in facts:
        mode, basis = facts["finality_mode"], finality.get("basis")
        allowed = BASES_OF_MODE.get(mode) if isinstance(mode, str) else None
        if allowed is None or basis not in allowed:
            raise ReceiptInvalid(
                f"{WHERE}.finality_mode: {mode!r} does not confirm on basis {basis!r}"
            )
        checked.append("finality_mode")
    return checked


def state_rest(facts: Mapping[str, Any], checked: Collection[str], claims: list[str]) -> None:
    """Any other fact (not null) is the signer's word: said so in ``claims``."""
    rest = sorted(k for k in facts if k not in checked and facts[k] is not None)
    if rest:
        claims.append(
            f"{WHERE} {', '.join(rest)}: the decision's record, not checked against the proofs"
        )
