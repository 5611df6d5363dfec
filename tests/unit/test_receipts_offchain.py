"""Off-chain receipts (Stripe, RQ, Celery settlements): the golden vectors verify, and any
single change fails with a precise reason.

The vectors (tests/vectors/receipts/offchain_*.json) were signed by the daemon's own code
after a Stripe-shaped flow (tests/integration/test_receipts_sources.py regenerates them).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from guard import eip712
from guard.canonical import canonical_json, digest
from guard.errors import ReceiptInvalid
from guard.hashing import keccak256
from guard.receipts import (
    OFFCHAIN_CHAIN_ID,
    OffchainTerms,
    Subject,
    body_of,
    message_hash,
    offchain_binding_body,
    ref_hash,
    typed_data,
)
from guard.verify import verify_receipt
from tests.integration.receipts_helpers import SIGNING_KEY
from watcher.receipts.signer import Signer

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "receipts"
NAMES = ("offchain_stripe_final", "offchain_stripe_declined", "offchain_stripe_refunded")


def load(name: str) -> dict[str, Any]:
    receipt: dict[str, Any] = json.loads((VECTORS / f"{name}.json").read_text())["receipt"]
    return receipt


def resigned(receipt: dict[str, Any]) -> dict[str, Any]:
    """``receipt``'s body signed again by the key that signed it (a signer's own mistake or
    a forgery by someone holding the key: the content checks must still catch it)."""
    signer = Signer(SIGNING_KEY, "env")
    assert signer.address == receipt["signer"]
    return signer.sign(body_of(receipt))


def reason(receipt: dict[str, Any]) -> str:
    with pytest.raises(ReceiptInvalid) as info:
        verify_receipt(receipt, trusted_signers=[receipt["signer"]])
    return info.value.reason


@pytest.mark.parametrize("name", NAMES)
def test_the_vectors_verify_with_their_claims(name: str) -> None:
    receipt = load(name)
    verified = verify_receipt(receipt, trusted_signers=[receipt["signer"]])
    assert verified.chain_id == 0 and verified.anchor is None
    assert receipt["tx_hash"] == ref_hash(receipt["offchain"]["ref"])
    assert verified.claims[0].startswith("stripe_payment_intent 'stripe' reported pi_")
    assert "not proven by this receipt" in verified.claims[0]


def test_the_eip712_message_binds_chain_id_0_and_keccak_of_the_ref() -> None:
    receipt = load("offchain_stripe_final")
    body = body_of(receipt)
    expected = eip712.signing_hash(
        kind=body["kind"],
        chain_id=0,
        tx_hash=keccak256(body["offchain"]["ref"].encode()),
        settlement_id=body["settlement_id"],
        issued_at=body["issued_at"],
        body_hash=keccak256(canonical_json(body)),
    )
    assert message_hash(body) == expected
    message = typed_data(body)["message"]
    assert message["chainId"] == 0 and message["txHash"] == ref_hash(body["offchain"]["ref"])


def test_changing_a_fact_breaks_the_decision_digest() -> None:
    receipt = resigned(load("offchain_stripe_final"))
    receipt["evidence"]["facts"]["balance_status"] = "pending"
    assert reason(resigned(receipt)).startswith(
        f"decision_digest: {receipt['decision_digest']} does not match the verdict, terms and "
        "evidence (sha256:"
    )


def test_changing_an_object_breaks_the_objects_digest() -> None:
    receipt = load("offchain_stripe_final")
    objects = receipt["offchain"]["objects"]
    first = sorted(objects)[0]
    objects[first] = objects[first][:-1] + ("0" if objects[first][-1] != "0" else "1")
    assert reason(resigned(receipt)).startswith(
        f"offchain.objects_digest: {receipt['offchain']['objects_digest']} does not match the "
        "objects (sha256:"
    )


def test_an_object_and_its_digest_changed_together_are_not_the_evidence() -> None:
    from guard.source import objects_digest

    receipt = load("offchain_stripe_final")
    off = receipt["offchain"]
    off["objects"]["txn_forged"] = "sha256:" + "0" * 64
    off["objects_digest"] = objects_digest(off["objects"])
    assert reason(resigned(receipt)) == (
        "offchain.objects: are not the objects the evidence recorded"
    )


def test_changing_an_event_id_is_refused() -> None:
    receipt = load("offchain_stripe_refunded")
    assert receipt["offchain"]["event_ids"]
    receipt["offchain"]["event_ids"][0] = "evt_forged"
    assert reason(resigned(receipt)) == (
        "offchain.event_ids: are not the event ids the evidence recorded"
    )
    receipt = load("offchain_stripe_refunded")
    receipt["evidence"]["facts"]["event_ids"][0] = "evt_forged"
    receipt["offchain"]["event_ids"][0] = "evt_forged"
    assert reason(resigned(receipt)).startswith("decision_digest: ")


def test_changing_a_signed_field_without_resigning_breaks_the_digest() -> None:
    receipt = load("offchain_stripe_final")
    receipt["offchain"]["history"][0]["at"] += 1
    assert reason(receipt).startswith("digest: ")


def test_changing_a_signature_byte_breaks_the_signature() -> None:
    receipt = load("offchain_stripe_final")
    signature = receipt["signature"]
    flipped = "1" if signature[10] != "1" else "2"
    receipt["signature"] = signature[:10] + flipped + signature[11:]
    assert reason(receipt).startswith("signature: ")


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("chain_id",), 1, "chain_id: an off-chain receipt has chain id 0, not 1"),
        (("tx_hash",), "0x" + "11" * 32, "tx_hash: is not keccak256 of offchain.ref"),
        (("chain",), "other", "chain: 'other' is not offchain.source 'stripe'"),
        (("offchain", "type"), "chain", "offchain.type: 'chain' is not 'offchain'"),
        (("offchain", "deadline"), 1, "decision_digest: "),
        (("offchain", "source_kind"), "rq_job", "evidence.facts.source_kind: "),
        (("offchain", "history"), [], "offchain.history: needs at least 1 item(s)"),
        (("offchain", "extra"), 1, "offchain.extra: is not a field of this receipt"),
        (("verdict",), "SETTLEMENT_FAILED", "verdict: SETTLEMENT_FAILED does not go with"),
    ],
)
def test_each_field_is_checked(path: tuple[str, ...], value: Any, expected: str) -> None:
    receipt = copy.deepcopy(load("offchain_stripe_final"))
    parent: Any = receipt
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    assert reason(resigned(receipt)).startswith(expected)


def test_an_untrusted_signer_is_refused() -> None:
    receipt = load("offchain_stripe_declined")
    with pytest.raises(ReceiptInvalid, match=r"signature: signer 0x.* is not trusted"):
        verify_receipt(receipt, trusted_signers=["0x" + "22" * 20])


# -- the binding of a source settlement's dependent state -------------------------------------


def offchain_binding() -> dict[str, Any]:
    """A binding signed by the daemon's code for a Stripe payment (fixed inputs)."""
    signer = Signer(SIGNING_KEY, "env")
    subject = Subject("stripe:pi_1", "stripe", OFFCHAIN_CHAIN_ID, ref_hash("pi_1"), signer.address)
    terms = OffchainTerms("stripe_payment_intent", "stripe", "pi_1", 1_000, 600_000)
    body = offchain_binding_body(subject, 1_001, digest({"ship": "order-7"}), terms, 601_000)
    return signer.sign(body)


def test_a_source_binding_verifies_and_names_what_it_binds() -> None:
    receipt = offchain_binding()
    verified = verify_receipt(receipt, trusted_signers=[receipt["signer"]])
    assert verified.kind == "dependent_state_binding_receipt"
    assert verified.facts.dependent_state_digest == digest({"ship": "order-7"})
    assert "stripe_payment_intent 'pi_1'" in verified.facts.summary


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("tx_hash",), "0x" + "11" * 32, "tx_hash: is not keccak256 of offchain.ref"),
        (("chain",), "other", "chain: 'other' is not offchain.source 'stripe'"),
        (("offchain", "ref"), "pi_2", "tx_hash: is not keccak256 of offchain.ref 'pi_2'"),
        (("binding", "deadline"), 999_999_999, "binding.deadline: "),
        (("binding", "required_confirmations"), 3, "binding.required_confirmations: is not a"),
        (("offchain", "type"), "chain", "offchain.type: 'chain' is not 'offchain'"),
    ],
)
def test_each_field_of_a_source_binding_is_checked(
    path: tuple[str, ...], value: Any, expected: str
) -> None:
    receipt = copy.deepcopy(offchain_binding())
    parent: Any = receipt
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    assert reason(resigned(receipt)).startswith(expected)


def test_changing_the_bound_state_without_resigning_breaks_the_digest() -> None:
    receipt = offchain_binding()
    receipt["binding"]["dependent_state_digest"] = digest({"ship": "order-8"})
    assert reason(receipt).startswith("digest: ")
