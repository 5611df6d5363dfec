"""Payment receipts checked offline, over a real mainnet block (Ethereum 18,000,000,
tests/vectors/real-blocks/eth-18000000.json, provenance in its README).

The receipts are built by hand as watcher/receipts/payment.py builds them: the block's two
tries rebuilt from the node's txs and receipts (their roots are the real header's), each
transfer's tx and receipt proven at its index, a token log by its position in its receipt
(its block-wide ``logIndex`` less the logs before it), then signed. Real transfers: a USDC
payment, a native (ETH) payment, a WETH payment split over three txs, two transfers in one
receipt. Then the tamper table: each change re-signed (so only the evidence is wrong) and
refused with its reason; and Hypothesis changing any one value of the ``payment`` and
``proof`` sections (re-signed) is refused too. Before guard/payment_proof.py, none of these receipts verified
(``payment`` was an unknown key of a finality receipt).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from chains.proofs import Trie, encode_receipt
from guard.errors import ReceiptInvalid
from guard.headers import header_json
from guard.payment import NATIVE, PaymentSpec, Transfer
from guard.payment_decode import receipt_logs
from guard.receipt_bodies import FinalityBasis, TimeoutTerms, timeout_body
from guard.receipt_format import Subject, body_of
from guard.receipt_payment import (
    PaymentProof,
    TransferProof,
    payment_finality_body,
    payment_json,
    payment_tx_hash,
)
from guard.tx_encode import encode_checked
from guard.verify import verify_receipt
from tests.unit.test_real_blocks import load
from watcher.receipts.signer import Signer

KEY = bytes([0x42]) * 32
SIGNER = Signer(KEY, "test")
BLOCK = "eth-18000000"
USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
WETH = "0xc02aaa39b223fe8d0a0e5c4f27ead9083c756cc2"
SID = "stl_payment_test_0001"


@cache
def tries() -> tuple[Trie, Trie]:
    vector = load(BLOCK)
    txs = Trie([encode_checked(tx).committed for tx in vector["block"]["transactions"]])
    receipts = Trie([encode_receipt(r) for r in vector["receipts"]])
    assert "0x" + txs.root.hex() == vector["block"]["transactionsRoot"]
    assert "0x" + receipts.root.hex() == vector["block"]["receiptsRoot"]
    return txs, receipts


def token_transfer(tx_index: int, log_index: int) -> Transfer:
    """The real Transfer log ``log_index`` (block-wide) of tx ``tx_index``."""
    vector = load(BLOCK)
    receipt = vector["receipts"][tx_index]
    log = next(entry for entry in receipt["logs"] if int(entry["logIndex"], 16) == log_index)
    return Transfer(
        tx_hash=receipt["transactionHash"],
        block_number=int(vector["block"]["number"], 16),
        block_hash=vector["block"]["hash"],
        tx_index=tx_index,
        log_index=log_index,
        sender="0x" + log["topics"][1][-40:],
        value=int(log["data"], 16),
    )


def native_transfer(tx_index: int) -> Transfer:
    tx = load(BLOCK)["block"]["transactions"][tx_index]
    return Transfer(
        tx_hash=tx["hash"],
        block_number=int(tx["blockNumber"], 16),
        block_hash=tx["blockHash"],
        tx_index=tx_index,
        log_index=None,
        sender=tx["from"],
        value=int(tx["value"], 16),
    )


def proof_of(transfer: Transfer) -> TransferProof:
    txs, receipts = tries()
    index = transfer.tx_index
    position = None
    if transfer.log_index is not None:
        position = transfer.log_index - sum(len(receipt_logs(v)) for v in receipts.values[:index])
    return TransferProof(
        receipt_proof=["0x" + n.hex() for n in receipts.proof(index)],
        transaction_proof=["0x" + n.hex() for n in txs.proof(index)],
        log_position=position,
    )


def body_for(
    spec: PaymentSpec,
    transfers: list[Transfer],
    *,
    compact: bool = False,
    basis: FinalityBasis | None = None,
) -> dict[str, Any]:
    block = load(BLOCK)["block"]
    header = header_json(block)
    facts = {
        "to": spec.to,
        "asset": spec.asset,
        "from": spec.sender,
        "amount": str(spec.amount),
        "head_number": int(block["number"], 16),
        "head_hash": block["hash"],
        "transfers": [
            {
                "tx_hash": t.tx_hash,
                "log_index": t.log_index,
                "value": str(t.value),
                "basis": "depth",
            }
            for t in transfers
        ],
    }
    basis = basis or FinalityBasis("depth", 1, None, ["https://node.example"])
    decision = {
        "verdict": "FINALITY_CONFIRMED",
        "digest": "sha256:" + "ab" * 32,
        "evidence": {"kind": basis.basis, "facts": facts},
    }
    subject = Subject(SID, "ethereum", 1, payment_tx_hash(SID), SIGNER.address)
    proofs = [proof_of(t) for t in transfers]
    proof = PaymentProof([header], transfers, proofs, compact_headers=compact)
    return payment_finality_body(subject, 1_700_000_000_000, decision, spec, proof, basis, None)


def signed(body: dict[str, Any]) -> dict[str, Any]:
    return SIGNER.sign(body)


def usdc_payment() -> dict[str, Any]:
    transfer = token_transfer(0x0D, 0x42)  # 8,000 USDC to 0xdf4558...
    return signed(
        body_for(
            PaymentSpec("0x" + "df455882303fa4fa16bd96da7f0ae3b13983cc4c", USDC, 8_000_000_000),
            [transfer],
        )
    )


@cache
def _weth_split() -> dict[str, Any]:
    to = "0x3fc91a3afd70395cd496c647d5a6cc9d4b2b7fad"
    transfers = [token_transfer(0x11, 0x55), token_transfer(0x17, 0x6C), token_transfer(0x19, 0x7B)]
    return signed(body_for(PaymentSpec(to, WETH, sum(t.value for t in transfers)), transfers))


def weth_split() -> dict[str, Any]:
    return copy.deepcopy(_weth_split())


def native_payment() -> dict[str, Any]:
    transfer = native_transfer(0x0B)  # 29.9982 ETH
    return signed(body_for(PaymentSpec(transfer_to(0x0B), NATIVE, transfer.value), [transfer]))


def transfer_to(tx_index: int) -> str:
    return str(load(BLOCK)["block"]["transactions"][tx_index]["to"])


# -- what verifies ---------------------------------------------------------------------------


def test_a_real_usdc_payment_is_proven_against_the_real_receipts_root() -> None:
    verified = verify_receipt(usdc_payment(), trusted_signers=[SIGNER.address])
    assert verified.verdict == "FINALITY_CONFIRMED"
    assert verified.facts.block_number == 18_000_000
    assert verified.facts.confirmations == 1
    assert "paid 8000000000 in 1 proven transfer(s)" in verified.facts.summary
    assert verified.claims == ()


def test_a_real_native_payment_is_proven_by_the_txs_to_and_value() -> None:
    receipt = native_payment()
    verified = verify_receipt(receipt, trusted_signers=[SIGNER.address])
    assert receipt["payment"]["asset"] == "native"
    assert "wei to" in verified.facts.summary


def test_a_payment_split_over_three_real_txs_adds_up() -> None:
    receipt = weth_split()
    verified = verify_receipt(receipt)
    assert len(receipt["proof"]["transfers"]) == 3
    assert receipt["payment"]["paid"] == receipt["payment"]["amount"]
    assert "in 3 proven transfer(s)" in verified.facts.summary


def test_two_transfers_in_one_receipt_are_two_logs_of_it() -> None:
    to = "0xacece14434d6b20f4131bf5c953a73f918100137"
    token = "0xce8d3c1a8edaa545072d5a4dfdc202f199d67090"
    transfers = [token_transfer(0x4F, 0xD1), token_transfer(0x4F, 0xD8)]
    receipt = signed(body_for(PaymentSpec(to, token, sum(t.value for t in transfers)), transfers))
    verify_receipt(receipt)
    positions = [p["log_position"] for p in receipt["proof"]["transfers"]]
    assert positions[0] != positions[1]


def test_an_overpaid_amount_verifies_and_a_from_filter_is_checked() -> None:
    transfer = token_transfer(0x0D, 0x42)
    spec = PaymentSpec("0xdf455882303fa4fa16bd96da7f0ae3b13983cc4c", USDC, 1, transfer.sender)
    verify_receipt(signed(body_for(spec, [transfer])))


def test_a_compact_header_chain_proves_the_same_payment() -> None:
    transfer = token_transfer(0x0D, 0x42)
    spec = PaymentSpec("0xdf455882303fa4fa16bd96da7f0ae3b13983cc4c", USDC, transfer.value)
    receipt = signed(body_for(spec, [transfer], compact=True))
    assert "header_chain" in receipt["proof"] and "headers" not in receipt["proof"]
    assert verify_receipt(receipt).facts.block_number == 18_000_000


def test_a_finalized_basis_is_the_nodes_claim_and_must_cover_the_latest_transfer() -> None:
    transfer = token_transfer(0x0D, 0x42)
    spec = PaymentSpec("0xdf455882303fa4fa16bd96da7f0ae3b13983cc4c", USDC, transfer.value)
    covering = FinalityBasis("finalized", 64, 18_000_010, ["https://node.example"])
    verified = verify_receipt(signed(body_for(spec, [transfer], basis=covering)))
    assert verified.claims == (
        "blocks 18000000..18000000 are at or below the node's finalized block 18000010: "
        "the observing node's claim",
    )
    short = FinalityBasis("finalized", 64, 17_999_999, ["https://node.example"])
    with pytest.raises(ReceiptInvalid, match="does not cover block 18000000"):
        verify_receipt(signed(body_for(spec, [transfer], basis=short)))


def timeout_receipt(paid_in_evidence: str) -> dict[str, Any]:
    """A payment's timeout signature (no header at the deadline) saying 8,000 USDC of
    10,000 came; the decision's evidence says ``paid_in_evidence``."""
    transfer = token_transfer(0x0D, 0x42)
    spec = PaymentSpec("0xdf455882303fa4fa16bd96da7f0ae3b13983cc4c", USDC, 10_000_000_000)
    decision = {
        "verdict": "TIMEOUT_TREATED_AS_FAILURE",
        "digest": "sha256:" + "cd" * 32,
        "evidence": {"kind": "payment_progress", "facts": {"paid": paid_in_evidence}},
    }
    terms = TimeoutTerms(1_000, 30_000, 3_600_000, 31_000, 31_500)
    subject = Subject(SID, "ethereum", 1, payment_tx_hash(SID), SIGNER.address)
    body = timeout_body(subject, 32_000, decision, terms, None, None, ["https://n"], None)
    return signed({**body, "payment": payment_json(spec, [transfer])})


def test_a_timeout_states_what_was_paid_as_the_signers_claim() -> None:
    verified = verify_receipt(timeout_receipt("8000000000"))
    assert verified.verdict == "TIMEOUT_TREATED_AS_FAILURE"
    assert any(
        c.startswith("paid 8000000000 of 10000000000 to 0xdf45") and "signer's claim" in c
        for c in verified.claims
    )
    with pytest.raises(ReceiptInvalid, match="is not what the decision's evidence says"):
        verify_receipt(timeout_receipt("1"))


def proven_timeout(change: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """A payment's timeout whose deadline falls after block 18,000,000 (the head then), with
    the 8,000 USDC it got proven in that block."""
    block = load(BLOCK)["block"]
    at = int(block["timestamp"], 16) * 1000
    transfer = token_transfer(0x0D, 0x42)
    spec = PaymentSpec("0xdf455882303fa4fa16bd96da7f0ae3b13983cc4c", USDC, 10_000_000_000)
    decision = {
        "verdict": "TIMEOUT_TREATED_AS_FAILURE",
        "digest": "sha256:" + "cd" * 32,
        "evidence": {"kind": "payment_progress", "facts": {"paid": str(transfer.value)}},
    }
    wait = 10**11  # about three years: block 20,000,000 (2024) falls before it too
    terms = TimeoutTerms(at, wait, wait, at + wait, at + wait + 500)
    subject = Subject(SID, "ethereum", 1, payment_tx_hash(SID), SIGNER.address)
    head = header_json(block)
    body = timeout_body(subject, at + wait + 900, decision, terms, head, None, ["n"], None)
    proof = PaymentProof([head], [transfer], [proof_of(transfer)])
    body = {**body, "payment": payment_json(spec, [transfer])}
    body["proof"] = {**body["proof"], **proof.as_json()}
    if change is not None:
        change(body)
    return signed(body)


def test_a_timeout_with_the_proofs_of_what_was_paid_proves_it() -> None:
    verified = verify_receipt(proven_timeout())
    assert "paid 8000000000 of 10000000000" in verified.facts.summary
    assert "1 proven transfer(s) in blocks 18000000..18000000" in verified.facts.summary
    assert not any("paid" in claim for claim in verified.claims)


def _value_up(body: dict[str, Any]) -> None:
    body["payment"]["transfers"][0]["value"] = "9000000000"
    body["payment"]["paid"], body["payment"]["remaining"] = "9000000000", "1000000000"
    body["evidence"]["facts"]["paid"] = "9000000000"


def _other_head(body: dict[str, Any]) -> None:
    body["proof"]["head_at_deadline"] = header_json(load("eth-20000000-raw")["block"])


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (_value_up, "is not the proven value 8000000000"),
        (_other_head, "does not hold the head at the deadline, block 20000000"),
    ],
    ids=["a changed value", "a head at the deadline outside the transfers' chain"],
)
def test_a_tampered_proven_timeout_is_refused(
    change: Callable[[dict[str, Any]], None], reason: str
) -> None:
    with pytest.raises(ReceiptInvalid, match=reason):
        verify_receipt(proven_timeout(change))


# -- the tamper table --------------------------------------------------------------------------


def edit(receipt: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """``receipt`` changed by ``change`` and signed again: the signature is right, the
    evidence is not."""
    body = copy.deepcopy(body_of(receipt))
    change(body)
    return signed(body)


def _value(body: dict[str, Any]) -> None:
    t = body["payment"]["transfers"][0]
    t["value"] = str(int(t["value"]) + 1)
    body["payment"]["paid"] = str(int(body["payment"]["paid"]) + 1)


def _drop(body: dict[str, Any]) -> None:
    dropped = int(body["payment"]["transfers"].pop(1)["value"])
    body["proof"]["transfers"].pop(1)
    paid = int(body["payment"]["paid"]) - dropped
    body["payment"]["paid"] = str(paid)
    body["payment"]["remaining"] = str(int(body["payment"]["amount"]) - paid)


def _drop_proof_only(body: dict[str, Any]) -> None:
    body["proof"]["transfers"].pop(1)


def _log_position(body: dict[str, Any]) -> None:
    body["proof"]["transfers"][0]["log_position"] -= 1


def _recipient(body: dict[str, Any]) -> None:
    other = "0x" + "11" * 20
    body["payment"]["to"] = other
    body["evidence"]["facts"]["to"] = other


def _contract(body: dict[str, Any]) -> None:
    body["payment"]["asset"] = USDC
    body["evidence"]["facts"]["asset"] = USDC


def _twice(body: dict[str, Any]) -> None:
    pay = body["payment"]
    pay["transfers"].append(copy.deepcopy(pay["transfers"][0]))
    body["proof"]["transfers"].append(copy.deepcopy(body["proof"]["transfers"][0]))
    pay["paid"] = str(int(pay["paid"]) + int(pay["transfers"][0]["value"]))


def _block_hash(body: dict[str, Any]) -> None:
    body["payment"]["transfers"][0]["block_hash"] = "0x" + "00" * 32


def _tx_index(body: dict[str, Any]) -> None:
    body["payment"]["transfers"][0]["tx_index"] += 1


def _amount_up(body: dict[str, Any]) -> None:
    amount = int(body["payment"]["amount"]) + 1
    body["payment"]["amount"] = str(amount)
    body["payment"]["remaining"] = "1"
    body["evidence"]["facts"]["amount"] = str(amount)


def _paid_sum(body: dict[str, Any]) -> None:
    body["payment"]["paid"] = str(int(body["payment"]["paid"]) + 5)


def _sender(body: dict[str, Any]) -> None:
    body["payment"]["transfers"][0]["from"] = "0x" + "22" * 20


def _from_filter(body: dict[str, Any]) -> None:
    body["payment"]["from"] = "0x" + "33" * 20
    body["evidence"]["facts"]["from"] = "0x" + "33" * 20


def _receipt_node(body: dict[str, Any]) -> None:
    nodes = body["proof"]["transfers"][0]["receipt_proof"]
    nodes[-1] = nodes[-1][:-2] + ("00" if nodes[-1][-2:] != "00" else "01")


def _depth(body: dict[str, Any]) -> None:
    body["finality"]["required_confirmations"] = 2


def _tx_hash(body: dict[str, Any]) -> None:
    body["tx_hash"] = "0x" + "44" * 32


def _not_in_evidence(body: dict[str, Any]) -> None:
    body["evidence"]["facts"]["transfers"][0]["tx_hash"] = "0x" + "55" * 32


TAMPERED: list[tuple[str, Callable[[], dict[str, Any]], Callable[[dict[str, Any]], None], str]] = [
    ("a changed value", weth_split, _value, "is not the proven value"),
    ("a changed native value", native_payment, _value, "is not the proven value"),
    ("a dropped transfer", weth_split, _drop, "below the amount"),
    ("a dropped proof", weth_split, _drop_proof_only, "2 proof(s) for 3 transfer(s)"),
    (
        "a log index pointing at another log",
        usdc_payment,
        _log_position,
        "log 2 of the proven receipt was emitted by 0x8787",
    ),
    ("another recipient", usdc_payment, _recipient, "not the recipient 0x1111"),
    ("another recipient of a native payment", native_payment, _recipient, "the proven tx pays"),
    ("another contract", weth_split, _contract, f"not the token {USDC}"),
    (
        "a transfer counted twice",
        weth_split,
        _twice,
        "counts the same transfer as payment.transfers[0]",
    ),
    ("another block", usdc_payment, _block_hash, "is not the header chain's block 18000000"),
    ("another tx of the block", usdc_payment, _tx_index, "receipt proof: node 2 does not hash"),
    ("an amount above what was paid", usdc_payment, _amount_up, "below the amount"),
    ("a paid that is not the sum", weth_split, _paid_sum, "is not the sum of the transfers"),
    ("another payer", usdc_payment, _sender, "is not the proven sender"),
    ("a from the transfers are not from", usdc_payment, _from_filter, "not by the payment's from"),
    ("a changed proof node", usdc_payment, _receipt_node, "receipt proof"),
    ("a depth the headers do not show", usdc_payment, _depth, "below the required 2"),
    ("a tx_hash not of the settlement", usdc_payment, _tx_hash, "tx_hash: a payment's is"),
    (
        "a transfer the decision did not count",
        usdc_payment,
        _not_in_evidence,
        "not among the decision",
    ),
]


@pytest.mark.parametrize(
    ("make", "change", "reason"),
    [(make, change, reason) for _, make, change, reason in TAMPERED],
    ids=[name for name, *_ in TAMPERED],
)
def test_a_tampered_payment_receipt_is_refused_with_its_reason(
    make: Callable[[], dict[str, Any]], change: Callable[[dict[str, Any]], None], reason: str
) -> None:
    tampered = edit(make(), change)
    with pytest.raises(ReceiptInvalid) as refused:
        verify_receipt(tampered)
    assert reason in str(refused.value)


def test_a_changed_body_without_a_new_signature_is_refused_by_the_seal() -> None:
    receipt = usdc_payment()
    receipt["payment"]["amount"] = "1"
    receipt["payment"]["remaining"] = "0"
    receipt["evidence"]["facts"]["amount"] = "1"
    with pytest.raises(ReceiptInvalid, match="digest"):
        verify_receipt(receipt)


# -- any one change of the evidence, re-signed ---------------------------------------------------


@cache
def split_leaves() -> list[tuple[tuple[str | int, ...], Any]]:
    return [
        (path, value) for path, value in leaves(weth_split()) if path[0] in ("payment", "proof")
    ]


def leaves(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], Any]]:
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in leaves(v, (*path, k))]
    if isinstance(value, list):
        return [leaf for i, v in enumerate(value) for leaf in leaves(v, (*path, i))]
    if isinstance(value, str | int) and not isinstance(value, bool):
        return [(path, value)]
    return []


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_any_change_of_a_payments_evidence_is_refused_even_re_signed(data: st.DataObject) -> None:
    path, value = data.draw(st.sampled_from(split_leaves()))
    if isinstance(value, int):
        changed: Any = data.draw(st.integers(0, 2**20).filter(lambda v: v != value))
    elif value.isdigit():
        changed = str(data.draw(st.integers(1, 10**20).filter(lambda v: str(v) != value)))
    else:
        at = data.draw(st.integers(0, len(value) - 1))
        pool = "0123456789abcdef" if value.startswith("0x") else "ABCDEFabcdef0123456789+/"
        char = data.draw(st.sampled_from(pool).filter(lambda c: c != value[at]))
        assume(not (value.startswith("0x") and at < 2))
        changed = value[:at] + char + value[at + 1 :]

    def change(body: dict[str, Any]) -> None:
        parent: Any = body
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = changed

    with pytest.raises(ReceiptInvalid):
        verify_receipt(edit(weth_split(), change))
