"""Offline check of a deposit's failure receipt: its transfer was reorged out and not
included again by the deadline (the body: guard/receipt_deposit.py).

:func:`verify_reorged_out` checks, with nothing but the receipt:

1. the ``payment`` section (guard/payment_proof.py): its shape, ``tx_hash`` derived from
   the settlement id, nothing counted (``paid`` 0);
2. ``failure.transfer``, the transfer as it was seen: its shape, its value the deposit's
   amount, its sender the deposit's ``from``;
3. the deadline's arithmetic and the head at the deadline (two linked headers around it),
   as for a timeout signature (guard/verify_terms.py);
4. the header chain at the deadline (each hash recomputed, each the parent of the next) ends
   at the head at the deadline and starts at the transfer's height (or at that head, if
   lower), and holds **another** block at that height: the block the transfer was seen in
   is not on the chain the deadline fell on;
5. the decision's evidence is a ``reorged_out`` failure naming that same transfer and the
   deposit's terms; its other facts are the signer's word.

Stated as claims, never proven: that the transfer was once in the block it names (that block
is gone from the chain: its header proves nothing now), and that the tx was not included
again by the deadline (an absence a few headers cannot show).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guard.deposit import LOST_KEYS, REORGED_OUT
from guard.errors import ReceiptInvalid
from guard.evidence_facts import WHERE, evidence_facts, hold, required, same, state_rest
from guard.fields import address, child, field, hash32, integer, keys, obj, optional_integer, text
from guard.payment import NATIVE
from guard.payment_proof import payment_terms
from guard.verify_chain import ChainFacts, proof_headers
from guard.verify_terms import COMMON, DECIDED, head_at_deadline, timeout_terms

PROOF_KEYS = ("head_at_deadline", "next_header", "headers", "header_chain")


def verify_reorged_out(body: Mapping[str, Any], state: str | None) -> tuple[ChainFacts, list[str]]:
    """A deposit's ``settlement_failure_receipt`` (``state``: its dependent-state digest)."""
    keys(body, (*COMMON, *DECIDED, "payment", "failure", "timeout", "proof"), "")
    terms = payment_terms(body)
    if terms.transfers or terms.paid != 0:
        raise ReceiptInvalid("payment.transfers: a reorged-out deposit has nothing counted")
    failure = child(body, "failure", "")
    keys(failure, ("reason", "transfer"), "failure")
    reason = text(failure, "reason", "failure")
    if reason != REORGED_OUT:
        raise ReceiptInvalid(f"failure.reason: {reason!r} is not {REORGED_OUT!r} (a deposit's)")
    lost = child(failure, "transfer", "failure")
    number, seen_hash = _lost(lost, terms.amount, terms.sender)
    deadline = timeout_terms(body)
    claims: list[str] = []
    anchor, where, hashes, now_there = _chain_at_deadline(
        child(body, "proof", ""), deadline, number, seen_hash, claims
    )
    _cross_check(body, terms.to, terms.asset, terms.amount, terms.sender, lost, hashes, claims)
    tx = lost["tx_hash"]
    claims.append(
        f"the transfer was seen in block {number} ({seen_hash}), tx {tx}: the signer's word "
        "(that block is no longer on the chain)"
    )
    claims.append(
        f"tx {tx} was not included again up to the head at the deadline (block {max(hashes)}): "
        "the signer's claim (a receipt cannot prove an absence)"
    )
    asset = "wei" if terms.asset == NATIVE else f"of token {terms.asset}"
    summary = (
        f"deposit of {terms.amount} {asset} to {terms.to} reorged out: seen in block {number} "
        f"({seen_hash}), {now_there}; deadline {deadline} ms, {where}"
    )
    return ChainFacts(summary=summary, anchor=anchor, dependent_state_digest=state), claims


def _chain_at_deadline(
    proof: Mapping[str, Any], deadline: int, number: int, seen_hash: str, claims: list[str]
) -> tuple[tuple[int, str] | None, str, dict[int, str], str]:
    """The proof's head at the deadline and header chain up to it, which must not hold
    ``seen_hash`` at ``number``. Returns (anchor, words for the head, the chain's hashes by
    number, what the chain holds at ``number``)."""
    keys(proof, PROOF_KEYS, "proof")
    ends = {k: proof.get(k) for k in ("head_at_deadline", "next_header")}
    if ends["head_at_deadline"] is None:
        raise ReceiptInvalid("proof.head_at_deadline: a reorged-out deposit names it")
    anchor, where = head_at_deadline(ends, deadline, claims)
    headers = proof_headers({k: v for k, v in proof.items() if k in ("headers", "header_chain")})
    hashes = {n: h for n, h, _ in headers}
    head = obj(ends["head_at_deadline"], "proof.head_at_deadline")
    head_number = int(str(head["number"]), 16)
    top = headers[-1][0]
    if (top, headers[-1][1]) != (head_number, head.get("hash")):
        raise ReceiptInvalid(
            f"proof: the header chain ends at block {top}, not at the head at the deadline "
            f"{head_number}"
        )
    start = min(number, head_number)
    if headers[0][0] != start:
        raise ReceiptInvalid(
            f"proof: the header chain starts at block {headers[0][0]}, not at {start} (the "
            "transfer's height, or the head at the deadline if lower)"
        )
    if number in hashes and hashes[number] == seen_hash:
        raise ReceiptInvalid(
            f"failure.transfer.block_hash: {seen_hash} is the chain's block {number} at the "
            "deadline: the transfer was not reorged out"
        )
    now_there = (
        f"block {number} is {hashes[number]} on the chain at the deadline"
        if number in hashes
        else f"the chain at the deadline ends below block {number}"
    )
    return anchor, where, hashes, now_there


def _lost(lost: Mapping[str, Any], amount: int, sender: str | None) -> tuple[int, str]:
    """The transfer as seen: its shape, and that it is the deposit's (its value the amount,
    its sender the deposit's ``from``). Returns its block number and hash."""
    where = "failure.transfer"
    keys(lost, LOST_KEYS, where)
    for name in LOST_KEYS:
        field(lost, name, where)
    hash32(lost, "tx_hash", where)
    optional_integer(lost, "log_index", where)
    number = integer(lost, "block_number", where)
    seen_hash = hash32(lost, "block_hash", where)
    if lost["value"] != str(amount):
        raise ReceiptInvalid(f"{where}.value: {lost['value']!r} is not the deposit's amount")
    if sender is not None and address(lost, "from", where) != sender:
        raise ReceiptInvalid(f"{where}.from: {lost['from']!r} is not the deposit's sender")
    return number, seen_hash


def _cross_check(
    body: Mapping[str, Any],
    to: str,
    asset: str,
    amount: int,
    sender: str | None,
    lost: Mapping[str, Any],
    hashes: Mapping[int, str],
    claims: list[str],
) -> None:
    """The evidence is a ``reorged_out`` failure of these terms naming this transfer; a head
    it names is the chain's (or above it: the signer's word); the rest is stated."""
    facts = evidence_facts(body.get("evidence"), REORGED_OUT)
    required(facts, ("to", "asset", "amount", "reorged", "deadline"))
    terms = {"to": to, "asset": asset, "amount": str(amount), "from": sender, "paid": "0"}
    checked = hold(facts, terms, "the deposit's")
    checked += hold(facts, {"chain": body.get("chain")}, "the receipt's")
    checked += hold(facts, {"deadline": body["timeout"]["deadline"]}, "the timeout's")
    reorged = obj(facts["reorged"], f"{WHERE}.reorged")
    for name in LOST_KEYS:
        value = reorged.get(name)
        if not same(value, lost[name]):
            raise ReceiptInvalid(
                f"{WHERE}.reorged.{name}: {value!r} is not failure.transfer's {lost.get(name)!r}"
            )
    checked.append("reorged")
    if "head_number" in facts:  # decided at or after the deadline, at the head it then saw
        head = integer(facts, "head_number", WHERE)
        head_hash = hash32(facts, "head_hash", WHERE)
        if head in hashes and hashes[head] != head_hash:
            raise ReceiptInvalid(
                f"{WHERE}.head_hash: {head_hash} is not the chain's block {head} ({hashes[head]})"
            )
        if head not in hashes:
            claims.append(f"the decision saw head {head} ({head_hash}): the signer's word")
        checked += ["head_number", "head_hash"]
    state_rest(facts, checked, claims)
