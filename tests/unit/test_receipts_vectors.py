"""Golden receipt vectors (tests/vectors/receipts/), shared with any other implementation.

Each ``<name>.json`` (other than ``tampered.json``) is::

    {"description": str,
     "trusted_signers": [address],
     "receipt": RECEIPT,                      the signed document, as the daemon serves it
     "expected": {"valid": true, "kind", "digest", "signer", "summary",
                  "claims": [str], "anchor": [number, hash] | null}}

``tampered.json`` lists single changes to those receipts and the exact reason a verifier
gives: ``{"name", "base": <vector name>, "path": [key or index...], "change", ...,
"expected_reason"}``. ``change`` is the new value, or one of ``drop-last`` (remove the last
item of an array), ``flip-last`` / ``flip-middle`` (change that hex digit: to 0, or to 1 if
it was 0), ``plus-one`` (an integer + 1), ``v-29`` (the signature's last byte becomes 0x1d);
``trusted_signers``, when present, replaces the base's.

The receipts were built from real anvil blocks by the daemon's own code; regenerate with
``.venv/bin/python -m tests.unit.receipt_vectors_gen`` (needs anvil) and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from guard.errors import ReceiptInvalid
from guard.verify import verify_receipt
from tests.unit.receipt_vectors_gen import _apply

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "receipts"
NAMES = sorted(p.stem for p in VECTORS.glob("*.json") if p.stem != "tampered")


def load(name: str) -> dict[str, Any]:
    vector: dict[str, Any] = json.loads((VECTORS / f"{name}.json").read_text())
    return vector


def test_every_kind_has_a_vector() -> None:
    kinds = {load(n)["expected"]["kind"] for n in NAMES}
    assert kinds == {
        "settlement_finality_receipt",
        "settlement_failure_receipt",
        "async_settlement_timeout_signature",
        "dependent_state_binding_receipt",
        "receipt_revocation",
    }


@pytest.mark.parametrize("name", NAMES)
def test_valid_vector(name: str) -> None:
    vector = load(name)
    expected = vector["expected"]
    verified = verify_receipt(vector["receipt"], trusted_signers=vector["trusted_signers"])
    assert verified.kind == expected["kind"]
    assert verified.digest == expected["digest"] == vector["receipt"]["digest"]
    assert verified.signer == expected["signer"]
    assert verified.facts.summary == expected["summary"]
    assert list(verified.claims) == expected["claims"]
    assert (list(verified.anchor) if verified.anchor else None) == expected["anchor"]


TAMPERED = json.loads((VECTORS / "tampered.json").read_text())


@pytest.mark.parametrize("case", TAMPERED, ids=lambda c: c["name"])
def test_tampered_vector(case: dict[str, Any]) -> None:
    base = load(case["base"])
    receipt = base["receipt"]
    if case["path"]:
        receipt = _apply(receipt, case["path"], case["change"])
    trusted = case.get("trusted_signers", base["trusted_signers"])
    with pytest.raises(ReceiptInvalid) as caught:
        verify_receipt(receipt, trusted_signers=trusted)
    assert caught.value.reason == case["expected_reason"]
