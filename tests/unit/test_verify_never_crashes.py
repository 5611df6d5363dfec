"""The offline verifier answers every document: valid, or invalid with a reason; never an
exception.

Anyone can hand ``finality verify``, the client's ``verify()`` or MCP's ``verify_receipt`` a
file, so the property is held over real receipts of every kind (the golden vectors, built by
the daemon's code from anvil blocks; payments proven in real mainnet block 18,000,000; the
four handoff elements; a source binding), each mutated by Hypothesis in type and in
structure: a value replaced by null, a number, infinity, a list, an object, a lone
surrogate, a deep nest; a key dropped or added; a node moved to another place. The only
outcomes allowed are a :class:`VerifiedReceipt` or :class:`ReceiptInvalid`; the client's
answer is a :class:`Verification` and MCP's a ``{"valid": ...}`` object. The named cases
from the field are pinned below the property so they never come back.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.errors import ReceiptInvalid, ReceiptUnreadable
from guard.handoff_receipts import HANDOFF_KINDS
from guard.receipt_json import MAX_DEPTH, parse_receipt
from guard.verify import VerifiedReceipt, verify_receipt
from tests.unit import test_handoff_receipts as handoff
from tests.unit import test_payment_proof as payment
from tests.unit import test_receipts_offchain as offchain
from watcher.client import Verification, verify

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "receipts"

Path_ = tuple[str | int, ...]


@cache
def receipts() -> dict[str, dict[str, Any]]:
    """One real receipt of every kind, by name (each verifies as it is)."""
    out = {
        p.stem: json.loads(p.read_text())["receipt"]
        for p in sorted(VECTORS.glob("*.json"))
        if p.stem != "tampered"
    }
    out["payment_usdc"] = payment.usdc_payment()
    out["payment_native"] = payment.native_payment()
    out["payment_split"] = payment.weth_split()
    out["payment_timeout_claimed"] = payment.timeout_receipt("8000000000")
    out["payment_timeout_proven"] = payment.proven_timeout()
    out["source_binding"] = offchain.offchain_binding()
    out.update({kind: handoff.signed(kind) for kind in HANDOFF_KINDS})
    for receipt in out.values():
        verify_receipt(receipt)
    return out


@cache
def places(name: str) -> list[Path_]:
    """Every place in a receipt (objects, arrays and leaves), the root excluded."""
    found: list[Path_] = []
    pending: list[tuple[Any, Path_]] = [(receipts()[name], ())]
    while pending:
        value, at = pending.pop()
        if at:
            found.append(at)
        if isinstance(value, dict):
            pending += [(v, (*at, k)) for k, v in value.items()]
        elif isinstance(value, list):
            pending += [(v, (*at, i)) for i, v in enumerate(value)]
    return sorted(found, key=repr)


def deep(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


HOSTILE = st.one_of(
    st.sampled_from(
        [
            None,
            True,
            False,
            0,
            -1,
            2**53,
            2**256,
            -(2**64),
            float("inf"),
            float("-inf"),
            float("nan"),
            1.5,
            "",
            "\ud800",
            "x\udfff",
            "0x",
            "0X" + "AB" * 32,
            "0x" + "ab" * 32,
            "0x" + "ab" * 20,
            "sha256:" + "00" * 32,
            "12",
            "-1",
            "Infinity",
            [],
            [None],
            [[]],
            {},
            {"a": None},
            {"tx_hash": [], "log_index": {}},
            deep(MAX_DEPTH + 8),
        ]
    ),
    st.integers(),
    st.text(max_size=6),
)
"""Values of the wrong type or form for whatever place they land in."""


def _resolve(root: Any, at: Path_) -> tuple[Any, str | int] | None:
    """(parent, key) of ``at`` in ``root``, or None when an earlier change removed it."""
    parent = root
    for key in at[:-1]:
        try:
            parent = parent[key]
        except (KeyError, IndexError, TypeError):
            return None
    last = at[-1]
    if isinstance(parent, dict) and isinstance(last, str) and last in parent:
        return parent, last
    if isinstance(parent, list) and isinstance(last, int) and last < len(parent):
        return parent, last
    return None


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A real receipt with one to three changes of type or structure."""
    name = draw(st.sampled_from(sorted(receipts())))
    receipt = copy.deepcopy(receipts()[name])
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.sampled_from(places(name)))
        found = _resolve(receipt, at)
        if found is None:
            continue
        parent, key = found
        how = draw(st.sampled_from(["replace", "replace", "drop", "add", "wrap", "move"]))
        if how == "replace":
            parent[key] = draw(HOSTILE)
        elif how == "drop":
            del parent[key]
        elif how == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "hash", "transfers", "head_number"]))] = draw(
                HOSTILE
            )
        elif how == "wrap":
            parent[key] = [parent[key]]
        elif how == "move":
            other = _resolve(receipts()[name], draw(st.sampled_from(places(name))))
            if other is not None:
                parent[key] = copy.deepcopy(other[0][other[1]])
    return name, receipt


def answer(receipt: Any) -> VerifiedReceipt | str:
    """The verifier's answer: what it verified, or its reason; any other exception fails."""
    try:
        return verify_receipt(receipt)
    except ReceiptInvalid as exc:
        assert exc.reason and exc.reason.isprintable()
        return exc.reason


@settings(max_examples=600, deadline=None, database=None)
@given(mutated())
def test_any_mutation_of_a_real_receipt_is_valid_or_a_reason(case: tuple[str, Any]) -> None:
    _, receipt = case
    answer(receipt)
    result = verify(receipt)
    assert isinstance(result, Verification)
    assert result.valid or result.reason


def test_every_kind_is_in_the_property() -> None:
    kinds = {r["kind"] for r in receipts().values()}
    assert kinds >= {
        "settlement_finality_receipt",
        "settlement_failure_receipt",
        "async_settlement_timeout_signature",
        "dependent_state_binding_receipt",
        "receipt_revocation",
        *HANDOFF_KINDS,
    }
    assert {"payment", "offchain"} <= {k for r in receipts().values() for k in r}


# -- the cases found in the field -----------------------------------------------------------


def _set(receipt: dict[str, Any], at: Path_, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(receipt)
    found = _resolve(out, at)
    assert found is not None, at
    found[0][found[1]] = value
    return out


CRASHES = [
    ("payment_usdc", ("evidence", "facts", "head_number"), None, "evidence.facts.head_number"),
    ("payment_usdc", ("evidence", "facts", "head_number"), "18000000", "head_number"),
    ("payment_usdc", ("evidence", "facts", "head_number"), [1], "head_number"),
    ("payment_usdc", ("evidence", "facts", "head_number"), float("inf"), "head_number"),
    ("payment_usdc", ("evidence", "facts", "transfers"), 7, "evidence.facts.transfers"),
    ("payment_usdc", ("evidence", "facts", "transfers", 0, "tx_hash"), [], "tx_hash"),
    ("payment_usdc", ("settlement_id",), "stl_\ud800", "settlement_id"),
    ("offchain_stripe_final", ("offchain", "ref"), "pi_\ud800", "offchain.ref"),
]
"""Documents that made the verifier raise (a traceback from ``finality verify``)."""


@pytest.mark.parametrize(("name", "at", "value", "named"), CRASHES)
def test_a_malformed_value_is_a_reason_naming_it(
    name: str, at: Path_, value: Any, named: str
) -> None:
    reason = answer(_set(receipts()[name], at, value))
    assert isinstance(reason, str) and named in reason, reason
    result = verify(_set(receipts()[name], at, value))
    assert not result.valid and result.reason == reason


def resigned(receipt: dict[str, Any]) -> dict[str, Any]:
    """The receipt signed again after a change (by its own signer where the test holds the
    key, else another): only the evidence checks can refuse it."""
    signer = payment.SIGNER if receipt["signer"] == payment.SIGNER.address else handoff.SIGNER
    body = {k: v for k, v in receipt.items() if k not in ("digest", "signature")}
    return signer.sign({**body, "signer": signer.address})


LIES = [
    ("finality_depth", ("status",), 0, "evidence.facts.status: 0 is not the proven tx's 1"),
    ("finality_depth", ("status",), True, "evidence.facts.status: True is not the proven tx's 1"),
    ("finality_depth", ("tx_index",), 8, "evidence.facts.tx_index: 8 is not the proven tx's 7"),
    ("finality_depth", ("head_number",), 2, "evidence.facts.head_number: 2 is below the proven"),
    ("finality_depth", ("head_hash",), "0x" + "ab" * 32, "evidence.facts.head_hash: 0xabab"),
    ("finality_depth", ("tx_hash",), "0x" + "ab" * 32, "evidence.facts.tx_hash: '0xabab"),
    ("finality_depth", ("finality_mode",), "finalized", "evidence.facts.finality_mode"),
    ("failure_reverted", ("basis",), "finalized", "evidence.facts.basis: 'finalized'"),
    ("failure_replaced", ("nonce",), 7, "evidence.facts.nonce: 7 is not the proven tx's 6"),
    ("failure_replaced", ("sender",), "0x" + "11" * 20, "evidence.facts.sender"),
    ("payment_usdc", ("head_number",), 17_999_999, "evidence.facts.head_number: 17999999 is"),
    ("payment_usdc", ("transfers", 0, "value"), "1", "evidence.facts.transfers[0].value: '1'"),
]
"""Evidence facts a signer may state falsely: each is checked against the proofs."""


@pytest.mark.parametrize(("name", "fact", "value", "expected"), LIES)
def test_a_fact_the_proofs_contradict_is_refused_even_signed(
    name: str, fact: Path_, value: Any, expected: str
) -> None:
    receipt = resigned(_set(receipts()[name], ("evidence", "facts", *fact), value))
    reason = answer(receipt)
    assert isinstance(reason, str) and reason.startswith(expected), reason


def test_a_head_above_the_proven_headers_is_stated_as_a_claim() -> None:
    facts = {"head_number": 9, "confirmations": 9}
    receipt = receipts()["finality_depth"]
    changed = copy.deepcopy(receipt)
    changed["evidence"]["facts"].update(facts)
    verified = answer(resigned(changed))
    assert isinstance(verified, VerifiedReceipt)
    assert any(c.startswith("the decision saw head 9 (") for c in verified.claims)
    assert verify_receipt(receipt).claims == ()


def test_a_fact_the_verifier_does_not_know_is_not_presented_as_proven() -> None:
    changed = copy.deepcopy(receipts()["finality_depth"])
    changed["evidence"]["facts"]["gas_used"] = 21000
    verified = answer(resigned(changed))
    assert isinstance(verified, VerifiedReceipt)
    assert verified.claims == (
        "evidence.facts gas_used: the decision's record, not checked against the proofs",
    )


def test_a_reason_is_one_printable_line_whatever_the_receipt_holds() -> None:
    hostile = "0x\n\x1b[2Jvalid: forged\u2028"
    reason = answer(_set(receipts()["finality_depth"], ("proof", "headers", 0, "hash"), hostile))
    assert isinstance(reason, str)
    assert reason.startswith("header 1: hash 0x\\n\\x1b[2Jvalid: forged\\u2028 does not match")
    assert reason.isprintable()


def test_a_nest_200000_deep_is_refused_as_text_and_as_a_value() -> None:
    text = '{"version": ' + "[" * 200_000 + "]" * 200_000 + "}"
    with pytest.raises(ReceiptInvalid, match="nested deeper than"):
        parse_receipt(text)
    nest: Any = []
    for _ in range(200_000):
        nest = [nest]
    reason = answer({**receipts()["finality_depth"], "evidence": nest})
    assert isinstance(reason, str) and "nested deeper than" in reason


def test_duplicate_keys_are_refused_whichever_value_comes_first() -> None:
    receipt = receipts()["finality_depth"]
    text = json.dumps(receipt)
    twice = text.replace('"verdict": ', '"verdict": "SETTLEMENT_FAILED", "verdict": ', 1)
    with pytest.raises(ReceiptInvalid, match="duplicate key 'verdict'"):
        parse_receipt(twice)
    assert verify(twice).reason == "receipt: duplicate key 'verdict' in one object " + (
        "(readers would disagree)"
    )
    assert verify(text).valid


def test_text_that_is_not_json_is_unreadable_not_invalid() -> None:
    for text in (b"\xff\xfe", "{", '{"version": 1,}', "1" * 5000):
        with pytest.raises(ReceiptUnreadable):
            parse_receipt(text)
    with pytest.raises(ReceiptInvalid, match="NaN is not a JSON number"):
        parse_receipt('{"version": NaN}')


def test_the_signature_has_one_spelling() -> None:
    receipt = receipts()["finality_depth"]
    upper = {**receipt, "signature": "0x" + receipt["signature"][2:].upper()}
    reason = answer(upper)
    assert reason == "signature: must be 0x and 65 bytes of lower-case hex (r || s || v)"
