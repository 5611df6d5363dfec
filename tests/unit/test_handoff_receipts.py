"""The four signed elements of a handoff: built, signed with a known key, verified offline,
and refused with a reason naming the fault when anything in them is changed."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from eth_account import Account

from guard.canonical import digest
from guard.errors import ReceiptInvalid
from guard.handoff_receipts import (
    CHECKPOINT,
    HANDOFF_KINDS,
    LOCK,
    RECOVERY,
    REGISTRY,
    Takeover,
    handoff_body,
)
from guard.receipts import ref_hash
from guard.verify import verify_receipt
from watcher.receipts.signer import Signer

KEY = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
OTHER = "0x" + "11" * 32
SIGNER = Signer(bytes.fromhex(KEY), "env")
INTRUDER = Signer(bytes.fromhex(OTHER[2:]), "env")
AT = 1_700_000_000_000

TAKEOVER = Takeover(
    name="local",
    chain_id=31337,
    from_owner="A",
    from_token=1,
    to_owner="B",
    to_token=2,
    reason="expired",
    at=AT,
    verdict="HANDOFF_SAFE",
    decision_digest="sha256:" + "ab" * 32,
)
ELEMENTS: dict[str, dict[str, Any]] = {
    CHECKPOINT: {
        "name": "local",
        "kind": "chain",
        "head_number": 12,
        "head_hash": "0x" + "12" * 32,
        "finalized_number": None,
        "header_window": [[11, "0x" + "11" * 32], [12, "0x" + "12" * 32]],
        "header_window_size": 2,
        "verdicts": {"AWAITING_FINALITY": 2, "FINALITY_CONFIRMED": 3},
        "watching": 2,
        "outbox_position": 7,
    },
    REGISTRY: {
        "name": "local",
        "operations": [
            {
                "id": "delivery:7",
                "kind": "commit",
                "state": "sending",
                "idempotency_key": "k7",
                "lease_ends_at": AT + 5,
            },
            {"id": "block:13", "kind": "block_processing"},
        ],
    },
    LOCK: {
        "name": "local",
        "from_owner": "A",
        "from_token": 1,
        "from_expires_at": AT - 100,
        "to_owner": "B",
        "to_token": 2,
        "acquired_at": AT,
        "expires_at": AT + 2_000,
        "reason": "expired",
    },
    RECOVERY: {
        "name": "local",
        "checks": [
            {
                "operation": "block:13",
                "predicate": "reread_header_window_from_common_ancestor",
                "outcome": "stored head 12 is canonical; nothing of block 13 committed",
                "material": False,
            }
        ],
    },
}


def signed(kind: str, takeover: Takeover = TAKEOVER, signer: Signer = SIGNER) -> dict[str, Any]:
    return signer.sign(handoff_body(kind, takeover, ELEMENTS[kind], signer.address, AT + 1))


def resigned(receipt: dict[str, Any]) -> dict[str, Any]:
    """The receipt re-signed by the genuine key after a change: the signature is valid, so
    only the body's own consistency checks can refuse it."""
    body = {k: v for k, v in receipt.items() if k not in ("digest", "signature")}
    return SIGNER.sign(body)


@pytest.mark.parametrize("kind", HANDOFF_KINDS)
def test_each_element_verifies_and_says_what_it_is(kind: str) -> None:
    receipt = signed(kind)
    verified = verify_receipt(receipt, trusted_signers=[SIGNER.address])
    assert verified.kind == kind
    assert verified.signer == SIGNER.address
    assert verified.settlement_id == "handoff:local:2"
    assert verified.tx_hash == ref_hash("handoff:local:2")
    assert verified.chain == "local" and verified.chain_id == 31337
    assert verified.verdict == "HANDOFF_SAFE"
    assert verified.handoff is not None
    assert (
        verified.handoff["from_owner"],
        verified.handoff["from_token"],
        verified.handoff["to_owner"],
        verified.handoff["to_token"],
        verified.handoff["at"],
    ) == ("A", 1, "B", 2, AT)
    assert verified.element == ELEMENTS[kind]
    assert receipt["element_digest"] == digest(ELEMENTS[kind]), "the old stored digest"
    assert "A (token 1) -> B (token 2), expired" in verified.summary()
    assert verified.claims, "what rests on the signer's word is said"


def test_a_first_takeover_has_no_predecessor() -> None:
    first = Takeover(
        "src", 0, None, None, "A", 1, "first", AT, "NO_TRANSACTION", TAKEOVER.decision_digest
    )
    element = {**ELEMENTS[LOCK], "name": "src", "from_owner": None, "from_token": None}
    element.update(from_expires_at=None, to_owner="A", to_token=1, reason="first")
    receipt = SIGNER.sign(handoff_body(LOCK, first, element, SIGNER.address, AT))
    verified = verify_receipt(receipt)
    assert verified.chain_id == 0 and verified.verdict == "NO_TRANSACTION"
    assert "- (no token) -> A (token 1), first" in verified.facts.summary


@pytest.mark.parametrize("kind", HANDOFF_KINDS)
@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("handoff", "name"), "other"),
        (("handoff", "from_owner"), "C"),
        (("handoff", "from_token"), 0),
        (("handoff", "to_owner"), "C"),
        (("handoff", "to_token"), 3),
        (("handoff", "at"), AT - 1),
        (("handoff", "verdict"), "NO_TRANSACTION"),
        (("handoff", "reason"), "released"),
        (("element", "name"), "other"),
        (("element_digest",), "sha256:" + "00" * 32),
        (("issued_at",), AT + 2),
        (("settlement_id",), "handoff:local:3"),
        (("chain_id",), 1),
    ],
)
def test_changing_any_field_breaks_the_signature(
    kind: str, path: tuple[str, ...], value: object
) -> None:
    receipt = copy.deepcopy(signed(kind))
    target: Any = receipt
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ReceiptInvalid) as refused:
        verify_receipt(receipt)
    assert refused.value.reason  # first failing check, in one line
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("kind", "path", "value", "reason"),
    [
        (LOCK, ("handoff", "to_token"), 1, "handoff.to_token: 1 is not above the predecessor"),
        (
            LOCK,
            ("handoff", "to_token"),
            3,
            "settlement_id: 'handoff:local:2' is not 'handoff:local:3'",
        ),
        (LOCK, ("element", "to_token"), 5, "element.to_token: 5 is not handoff.to_token 2"),
        (LOCK, ("element", "from_owner"), "C", "element.from_owner: 'C' is not handoff.from_owner"),
        (LOCK, ("element", "expires_at"), AT, "element.expires_at:"),
        (CHECKPOINT, ("element", "name"), "x", "element.name: 'x' is not handoff.name"),
        (CHECKPOINT, ("element", "kind"), "moon", "element.kind: 'moon' is not"),
        (CHECKPOINT, ("handoff", "reason"), "kidnapped", "handoff.reason: 'kidnapped'"),
        (REGISTRY, ("handoff", "verdict"), "FINE", "handoff.verdict: 'FINE'"),
        (RECOVERY, ("chain",), "other", "chain: 'other' is not handoff.name 'local'"),
        (RECOVERY, ("tx_hash",), "0x" + "00" * 32, "tx_hash: is not keccak256"),
        (RECOVERY, ("handoff", "from_token"), None, "handoff.from_token: a first takeover"),
        (RECOVERY, ("issued_at",), AT - 1, "issued_at: is before the takeover"),
        (RECOVERY, ("extra",), 1, "extra: is not a field of this receipt"),
    ],
)
def test_a_genuinely_signed_but_inconsistent_element_is_refused_with_its_reason(
    kind: str, path: tuple[str, ...], value: object, reason: str
) -> None:
    receipt = copy.deepcopy(signed(kind))
    target: Any = receipt
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    if path[0] == "element":
        receipt["element_digest"] = digest(receipt["element"])  # a consistent forgery
    with pytest.raises(ReceiptInvalid) as refused:
        verify_receipt(resigned(receipt))
    assert reason in str(refused.value), str(refused.value)


def test_an_element_changed_together_with_its_digest_is_still_checked() -> None:
    receipt = copy.deepcopy(signed(RECOVERY))
    receipt["element"]["checks"][0]["material"] = "no"
    receipt["element_digest"] = digest(receipt["element"])
    with pytest.raises(
        ReceiptInvalid, match=r"element.checks\[0\].material: must be true or false"
    ):
        verify_receipt(resigned(receipt))
    registry = copy.deepcopy(signed(REGISTRY))
    registry["element"]["operations"].append({"id": "block:13", "kind": "block_processing"})
    registry["element_digest"] = digest(registry["element"])
    with pytest.raises(ReceiptInvalid, match=r"operations\[2\].id: 'block:13' is listed twice"):
        verify_receipt(resigned(registry))


def test_wrong_signer_is_refused() -> None:
    receipt = signed(LOCK)
    with pytest.raises(ReceiptInvalid, match=f"signature: signer {SIGNER.address} is not trusted"):
        verify_receipt(receipt, trusted_signers=[INTRUDER.address])
    forged = {**receipt, "signature": signed(LOCK, signer=INTRUDER)["signature"]}
    with pytest.raises(ReceiptInvalid, match="signature: recovers 0x"):
        verify_receipt(forged)
    assert Account.from_key(OTHER).address.lower() == INTRUDER.address


def test_an_unknown_element_kind_is_not_built() -> None:
    with pytest.raises(ValueError, match="is not a handoff element"):
        handoff_body("handoff_vibes", TAKEOVER, {}, SIGNER.address, AT)


def test_records_without_signatures_are_still_listed() -> None:
    from watcher.api.handoff import handoff_json

    old: dict[str, Any] = {
        "id": 1,
        "name": "local",
        "from_owner": "A",
        "from_token": 1,
        "to_owner": "B",
        "to_token": 2,
        "reason": "expired",
        "verdict": "HANDOFF_SAFE",
        "at": AT,
        "recovery": [],
        "elements": {
            k: {"kind": k, "body": ELEMENTS[k], "digest": digest(ELEMENTS[k])}
            for k in HANDOFF_KINDS
        },
    }
    shown = handoff_json(old, full=True)
    assert shown["signed"] is False and shown["receipts"] == dict.fromkeys(HANDOFF_KINDS)
    assert shown["elements"][LOCK]["digest"] == digest(ELEMENTS[LOCK])
    new = copy.deepcopy(old)
    for k in HANDOFF_KINDS:
        new["elements"][k]["receipt"] = signed(k)
    assert handoff_json(new)["signed"] is True
    assert handoff_json(new, full=True)["receipts"][LOCK] == signed(LOCK)
