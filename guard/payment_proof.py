"""Offline check of a payment's receipts (settlement kind ``evm_payment``).

A finality receipt of a payment (guard/receipt_payment.py) carries the terms (``to``,
``asset``, ``amount``, ``from``), the counted transfers, and for each transfer its proof in
one header chain. :func:`verify_payment` checks, with nothing but the receipt:

1. the header chain (each header's hash recomputed, each the parent of the next);
2. per transfer: its block is in that chain under the hash it names, its tx and receipt are
   under that block's roots at ``tx_index`` (Merkle-Patricia), the tx hashes to its
   ``tx_hash``, the receipt's status is 1; then, decoded from the proven bytes,
   *native*: the tx's ``to`` is the recipient, its value the transfer's value, its sender
   the transfer's ``from``; *token*: the log at ``log_position`` of the proven receipt was
   emitted by the token contract, its topic0 is ``Transfer(address,address,uint256)``,
   topic2 the recipient, topic1 the transfer's ``from``, its data the value; with a ``from``
   in the terms, every transfer is from it;
3. no transfer counted twice (the same tx, and for a token the same log);
4. the proven values add up to ``paid`` and to at least ``amount``;
5. each transfer is final by the receipt's basis: depth (head - block + 1 >= N, proven by
   the headers), or the node's ``finalized``/``safe`` tag covering the latest transfer (a
   claim, returned as such).

A payment's timeout signature is checked as any timeout (guard/verify_terms.py) plus the
shape and sums of its ``payment`` section; its transfers are proven as above (not against
the amount) when ``proof`` carries them, in a header chain through the head at the
deadline, else they are the signer's word.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from guard import receipts as fmt
from guard.errors import ReceiptInvalid
from guard.evidence_facts import (
    WHERE,
    evidence_facts,
    hold,
    hold_head,
    hold_terms,
    required,
    same,
    state_rest,
)
from guard.fields import (
    address,
    array,
    child,
    field,
    hash32,
    integer,
    keys,
    obj,
    optional_integer,
    text,
)
from guard.finality_rule import TAG_OF_BASIS
from guard.payment import NATIVE, PAYMENT_KIND, TRANSFER_TOPIC
from guard.payment_decode import PaymentTerms, ProvenTransfer, prove_transfer
from guard.receipt_payment import PAYMENT_VERSION, payment_tx_hash
from guard.verify_chain import ChainFacts, proof_headers
from guard.verify_terms import COMMON, DECIDED, finality_terms, verify_timeout

PAYMENT_KEYS = ("kind", "version", "to", "asset", "amount", "from", "paid", "remaining")
TRANSFER_KEYS = ("tx_hash", "block_number", "block_hash", "tx_index", "log_index", "from", "value")

__all__ = ["TRANSFER_TOPIC", "PaymentTerms", "verify_payment"]


def _decimal(m: Mapping[str, Any], key: str, where: str, minimum: int = 0) -> int:
    value = field(m, key, where)
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        raise ReceiptInvalid(f"{where}.{key}: must be a decimal string of base units")
    if len(value) > 1 and value[0] == "0":
        raise ReceiptInvalid(f"{where}.{key}: has a leading zero")
    number = int(value)
    if number < minimum or number >= 2**256:
        raise ReceiptInvalid(f"{where}.{key}: {value} is out of range")
    return number


def payment_terms(body: Mapping[str, Any]) -> PaymentTerms:
    """The ``payment`` section of ``body``, its shape and its sums checked, and the body's
    ``tx_hash`` the one of its settlement id (:func:`payment_tx_hash`)."""
    expected = payment_tx_hash(text(body, "settlement_id", ""))
    if body.get("tx_hash") != expected:
        raise ReceiptInvalid(
            f"tx_hash: a payment's is keccak256('evm_payment:' + settlement_id) = {expected}"
        )
    pay = child(body, "payment", "")
    keys(pay, (*PAYMENT_KEYS, "transfers"), "payment")
    if field(pay, "kind", "payment") != PAYMENT_KIND:
        raise ReceiptInvalid(f"payment.kind: {pay.get('kind')!r} is not {PAYMENT_KIND!r}")
    version = field(pay, "version", "payment")
    if version != PAYMENT_VERSION or isinstance(version, bool):
        raise ReceiptInvalid(f"payment.version: {version!r} is not {PAYMENT_VERSION}")
    to = address(pay, "to", "payment")
    asset = text(pay, "asset", "payment")
    if asset != NATIVE:
        asset = address(pay, "asset", "payment")
    sender = None if field(pay, "from", "payment") is None else address(pay, "from", "payment")
    amount = _decimal(pay, "amount", "payment", minimum=1)
    paid = _decimal(pay, "paid", "payment")
    remaining = _decimal(pay, "remaining", "payment")
    if remaining != max(0, amount - paid):
        raise ReceiptInvalid(
            f"payment.remaining: {remaining} is not amount - paid = {max(0, amount - paid)}"
        )
    transfers = [
        obj(t, f"payment.transfers[{i}]") for i, t in enumerate(array(pay, "transfers", "payment"))
    ]
    values = 0
    for i, t in enumerate(transfers):
        where = f"payment.transfers[{i}]"
        keys(t, TRANSFER_KEYS, where)
        values += _decimal(t, "value", where, minimum=1)
    if values != paid:
        raise ReceiptInvalid(f"payment.paid: {paid} is not the sum of the transfers ({values})")
    return PaymentTerms(to, asset, amount, sender, paid, transfers)


def verify_payment(
    kind: str, body: Mapping[str, Any], state: str | None
) -> tuple[ChainFacts, list[str]]:
    """A payment's finality or timeout receipt (``state``: its dependent-state digest)."""
    if kind == fmt.TIMEOUT:
        return _verify_timeout(body, state)
    if kind != fmt.FINALITY:
        raise ReceiptInvalid(f"kind: a payment has no {kind}")
    keys(body, (*COMMON, *DECIDED, "payment", "finality", "proof"), "")
    terms = payment_terms(body)
    if not terms.transfers:
        raise ReceiptInvalid("payment.transfers: a finality receipt proves at least one transfer")
    proof = child(body, "proof", "")
    keys(proof, ("headers", "header_chain", "transfers"), "proof")
    chain, proven = _prove_all(terms, proof)
    if terms.paid < terms.amount:
        raise ReceiptInvalid(
            f"payment.paid: the proven transfers add up to {terms.paid}, below the amount "
            f"{terms.amount}"
        )
    claims: list[str] = []
    basis = _verify_basis(child(body, "finality", ""), chain, proven, claims)
    _cross_check(body, terms, chain, basis, claims)
    latest = max(p.block_number for p in proven)
    depth = chain.head_number - latest + 1
    asset = "wei" if terms.asset == NATIVE else f"of token {terms.asset}"
    summary = (
        f"payment of {terms.amount} {asset} to {terms.to}: paid {terms.paid} in "
        f"{len(proven)} proven transfer(s), blocks {chain.first}..{latest}, depth {depth} "
        f"(head {chain.head_number}), basis {basis}"
    )
    facts = ChainFacts(
        summary=summary,
        block_number=latest,
        block_hash=chain.hashes[latest],
        status=1,
        confirmations=depth,
        anchor=(chain.head_number, chain.head_hash),
        dependent_state_digest=state,
    )
    return facts, claims


TIMEOUT_PROOF = ("head_at_deadline", "next_header")
"""The timeout signature's own ``proof`` keys; a payment's may add its transfers' proofs."""


def _verify_timeout(body: Mapping[str, Any], state: str | None) -> tuple[ChainFacts, list[str]]:
    """A payment's timeout signature: the timeout's own checks, the payment section's shape
    and sums, and what was paid: proven when ``proof`` carries the transfers' proofs (in a
    header chain through the head at the deadline), else the signer's word (a claim)."""
    terms = payment_terms(body)
    evidence = body.get("evidence")
    facts_of = evidence.get("facts") if isinstance(evidence, Mapping) else None
    if isinstance(facts_of, Mapping) and facts_of.get("paid") not in (None, str(terms.paid)):
        raise ReceiptInvalid(
            f"payment.paid: {terms.paid} is not what the decision's evidence says was paid "
            f"({facts_of.get('paid')})"
        )
    proof = child(body, "proof", "")
    keys(proof, (*TIMEOUT_PROOF, "headers", "header_chain", "transfers"), "proof")
    own = {**body, "proof": {k: v for k, v in proof.items() if k in TIMEOUT_PROOF}}
    facts, claims = verify_timeout({k: v for k, v in own.items() if k != "payment"}, state)
    what = f"paid {terms.paid} of {terms.amount} to {terms.to} before the deadline"
    if "transfers" not in proof:
        claims.append(
            f"{what} ({len(terms.transfers)} transfer(s)): the signer's claim, not proven by "
            "this receipt"
        )
        return facts, claims
    chain, proven = _prove_all(terms, proof)
    head = obj(proof.get("head_at_deadline"), "proof.head_at_deadline")
    number = int(str(head["number"]), 16)
    if chain.hashes.get(number) != head.get("hash"):
        raise ReceiptInvalid(
            f"proof: the transfers' header chain ({chain.first}..{chain.head_number}) does not "
            f"hold the head at the deadline, block {number}"
        )
    blocks = f"blocks {chain.first}..{max(p.block_number for p in proven)}"
    summary = f"{facts.summary}; {what}: {len(proven)} proven transfer(s) in {blocks}"
    return replace(facts, summary=summary), claims


@dataclass(frozen=True)
class _Chain:
    """The checked header chain: hash and header by number, first block and head."""

    hashes: dict[int, str]
    headers: dict[int, Mapping[str, Any]]
    first: int
    head_number: int
    head_hash: str


def _header_chain(proof: Mapping[str, Any]) -> _Chain:
    headers = proof_headers(proof)
    return _Chain(
        {n: h for n, h, _ in headers},
        {n: header for n, _, header in headers},
        headers[0][0],
        headers[-1][0],
        headers[-1][1],
    )


def _block_of(claim: Mapping[str, Any], chain: _Chain, where: str) -> Mapping[str, Any]:
    """The header of the transfer's block: in the chain, under the hash the claim names."""
    number = integer(claim, "block_number", where)
    block_hash = hash32(claim, "block_hash", where)
    if number not in chain.hashes:
        raise ReceiptInvalid(
            f"{where}.block_number: block {number} is not in the header chain "
            f"({chain.first}..{chain.head_number})"
        )
    if chain.hashes[number] != block_hash:
        raise ReceiptInvalid(
            f"{where}.block_hash: {block_hash} is not the header chain's block {number} "
            f"({chain.hashes[number]})"
        )
    return chain.headers[number]


def _prove_all(
    terms: PaymentTerms, proof: Mapping[str, Any]
) -> tuple[_Chain, list[ProvenTransfer]]:
    """Every transfer proven in the one header chain, none counted twice."""
    chain = _header_chain(proof)
    entries = array(proof, "transfers", "proof")
    if len(entries) != len(terms.transfers):
        raise ReceiptInvalid(
            f"proof.transfers: {len(entries)} proof(s) for {len(terms.transfers)} transfer(s)"
        )
    proven: list[ProvenTransfer] = []
    seen: dict[tuple[str, int | None], int] = {}
    for i, (claim, entry) in enumerate(zip(terms.transfers, entries, strict=True)):
        where = f"payment.transfers[{i}]"
        header = _block_of(claim, chain, where)
        one = prove_transfer(claim, obj(entry, f"proof.transfers[{i}]"), header, terms, where)
        key = (one.tx_hash, one.log_position)
        if key in seen:
            log = "" if one.log_position is None else f", log {one.log_position}"
            raise ReceiptInvalid(
                f"{where}: counts the same transfer as payment.transfers[{seen[key]}] "
                f"(tx {one.tx_hash}{log})"
            )
        seen[key] = i
        proven.append(one)
    first = min(p.block_number for p in proven)
    if chain.first != first:
        raise ReceiptInvalid(
            f"proof: the header chain starts at block {chain.first}, not at the first "
            f"transfer's block {first}"
        )
    return chain, proven


def _verify_basis(
    finality: Mapping[str, Any], chain: _Chain, proven: Sequence[ProvenTransfer], claims: list[str]
) -> str:
    """The finality section: every transfer final by its basis; confirmations = the depth
    of the latest transfer."""
    basis, required, confirmations = finality_terms(finality)
    latest = max(p.block_number for p in proven)
    depth = chain.head_number - latest + 1
    if confirmations != depth:
        raise ReceiptInvalid(
            f"finality.confirmations: {confirmations} is not the depth the headers show for "
            f"the latest transfer's block {latest} ({depth})"
        )
    if basis in ("depth", "depth_and_finalized") and depth < required:
        raise ReceiptInvalid(
            f"finality: the transfer in block {latest} has depth {depth}, below the required "
            f"{required}"
        )
    tag = TAG_OF_BASIS.get(basis)
    if tag is None:
        return basis
    name = f"{tag}_number"
    height = optional_integer(finality, name, "finality")
    if height is None or height < latest:
        raise ReceiptInvalid(f"finality.{name}: {height} does not cover block {latest}")
    if field(finality, "claim", "finality") != fmt.CLAIM_OF_BASIS[basis]:
        raise ReceiptInvalid(f"finality.claim: must state that {tag} is the node's claim")
    claims.append(
        f"blocks {chain.first}..{latest} are at or below the node's {tag} block {height}: "
        "the observing node's claim"
    )
    return basis


def _cross_check(
    body: Mapping[str, Any], terms: PaymentTerms, chain: _Chain, basis: str, claims: list[str]
) -> None:
    """The decision's evidence must be a finality on ``basis`` for these terms, name every
    proven transfer as it was proven, and each of its other facts be what the proofs show,
    restate the receipt's terms, or be said to be the signer's word."""
    facts = evidence_facts(body.get("evidence"), basis)
    required(facts, ("to", "asset", "amount", "from", "transfers", "head_number"))
    checked = hold(
        facts,
        {"to": terms.to, "asset": terms.asset, "amount": str(terms.amount), "from": terms.sender},
        "the payment's",
    )
    checked += hold(facts, {"paid_final": str(terms.paid)}, "the proven transfers' sum")
    entries = array(facts, "transfers", WHERE)
    unproven = _named_transfers(entries, terms)
    checked.append("transfers")
    paid = sum(
        _decimal(obj(e, f"{WHERE}.transfers[{i}]"), "value", f"{WHERE}.transfers[{i}]")
        for i, e in enumerate(entries)
    )
    checked += hold(
        facts,
        {
            "paid": str(paid),
            "remaining": str(max(0, terms.amount - paid)),
            "overpaid": str(max(0, paid - terms.amount)),
        },
        "its transfers' sum (or what follows from it)",
    )
    latest = max(integer(t, "block_number", "payment") for t in terms.transfers)
    checked += hold_head(facts, latest, chain.hashes, claims)
    checked += hold_terms(facts, body, obj(body.get("finality"), "finality"))
    if unproven:
        claims.append(
            f"{WHERE}.transfers {', '.join(unproven)}: not final at the decision and not "
            "proven by this receipt (the signer's word)"
        )
    state_rest(facts, checked, claims)


def _named_transfers(entries: Sequence[Any], terms: PaymentTerms) -> list[str]:
    """Every proven transfer is among the evidence's ``entries``, as it was proven; returns
    where the entries that are not proven are (each must say it was not final)."""
    proven = {(t["tx_hash"], t["log_index"]): t for t in terms.transfers}
    named: list[tuple[str, tuple[str, int | None], Mapping[str, Any]]] = []
    for i, value in enumerate(entries):
        where = f"{WHERE}.transfers[{i}]"
        entry = obj(value, where)
        key = (hash32(entry, "tx_hash", where), optional_integer(entry, "log_index", where))
        named.append((where, key, entry))
    keys_named = {key for _, key, _ in named}
    for i, t in enumerate(terms.transfers):
        if (t["tx_hash"], t["log_index"]) not in keys_named:
            raise ReceiptInvalid(
                f"payment.transfers[{i}]: is not among the decision's evidence transfers"
            )
    unproven: list[str] = []
    for where, key, entry in named:
        claim = proven.get(key)
        if claim is None:
            if field(entry, "basis", where) is not None:
                raise ReceiptInvalid(f"{where}: is final by its basis but not proven here")
            unproven.append(where.removeprefix(f"{WHERE}.transfers"))
            continue
        for name in ("block_number", "block_hash", "tx_index", "from", "value"):
            if name in entry and not same(entry[name], claim[name]):
                raise ReceiptInvalid(
                    f"{where}.{name}: {entry[name]!r} is not the proven transfer's {claim[name]!r}"
                )
    return unproven
