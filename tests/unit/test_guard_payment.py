"""The payment decision (guard/payment.py) as a table: transfers, depths and the finality
rule in, verdict and what was paid out. Pure: no node, no store, no clock."""

from __future__ import annotations

import pytest

from guard.hexes import checksum_address
from guard.payment import (
    NATIVE,
    InvalidPaymentField,
    PaymentSpec,
    RulePosition,
    Transfer,
    decide_payment,
    parse_amount,
    parse_payment_address,
)
from guard.settlement import Settlement, SettlementPolicy, Verdict
from guard.types import SettlementId, UnixMillis

T0 = 1_700_000_000_000
SPEC = PaymentSpec(to="0x" + "ab" * 20, asset=NATIVE, amount=1000)
SETTLEMENT = Settlement(SettlementId("pay_x"), True, UnixMillis(T0), 60_000)
POLICY = SettlementPolicy(max_wait_ms=3_600_000)


def transfer(block: int, value: int, log_index: int | None = None) -> Transfer:
    return Transfer(
        "0x" + f"{block:064x}",
        block,
        "0x" + f"{block + 1:064x}",
        0,
        log_index,
        "0x" + "cd" * 20,
        value,
    )


def at(head: int, mode: str = "depth", finalized: int | None = None) -> RulePosition:
    return RulePosition(mode, 3, head, "0x" + "ee" * 32, finalized)


CASES = [
    # (name, transfers, position, now offset ms, verdict, paid, paid_final)
    ("nothing yet", [], at(10), 0, Verdict.AWAITING_FINALITY, None, None),
    ("exact, not deep", [transfer(10, 1000)], at(11), 0, Verdict.AWAITING_FINALITY, "1000", "0"),
    ("exact, deep", [transfer(10, 1000)], at(12), 0, Verdict.FINALITY_CONFIRMED, "1000", "1000"),
    ("partial, deep", [transfer(10, 999)], at(20), 0, Verdict.AWAITING_FINALITY, "999", "999"),
    ("over", [transfer(10, 1500)], at(12), 0, Verdict.FINALITY_CONFIRMED, "1500", "1500"),
    (
        "split, last not final",
        [transfer(10, 600), transfer(11, 400)],
        at(12),
        0,
        Verdict.AWAITING_FINALITY,
        "1000",
        "600",
    ),
    (
        "split, both final",
        [transfer(10, 600), transfer(11, 400, 3)],
        at(13),
        0,
        Verdict.FINALITY_CONFIRMED,
        "1000",
        "1000",
    ),
    (
        "finalized rule, tag covers",
        [transfer(10, 1000)],
        at(10, "finalized", finalized=10),
        0,
        Verdict.FINALITY_CONFIRMED,
        "1000",
        "1000",
    ),
    (
        "finalized rule, deep but tag below",
        [transfer(10, 1000)],
        at(30, "finalized", finalized=9),
        0,
        Verdict.AWAITING_FINALITY,
        "1000",
        "0",
    ),
    (
        "deadline, partial",
        [transfer(10, 250)],
        at(20),
        60_000,
        Verdict.TIMEOUT_TREATED_AS_FAILURE,
        "250",
        "250",
    ),
    (
        "deadline, paid but not final",
        [transfer(10, 1000)],
        at(10),
        60_000,
        Verdict.TIMEOUT_TREATED_AS_FAILURE,
        "1000",
        "0",
    ),
    ("deadline, nothing", [], at(20), 60_000, Verdict.TIMEOUT_TREATED_AS_FAILURE, None, None),
]


@pytest.mark.parametrize(
    ("transfers", "pos", "later", "verdict", "paid", "paid_final"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_the_payment_decision_table(
    transfers: list[Transfer],
    pos: RulePosition,
    later: int,
    verdict: Verdict,
    paid: str | None,
    paid_final: str | None,
) -> None:
    decision = decide_payment(SETTLEMENT, "local", SPEC, transfers, pos, POLICY, T0 + later)
    assert decision.verdict is verdict
    facts = dict(decision.evidence.facts) if decision.evidence is not None else {}
    assert facts.get("paid") == paid
    assert facts.get("paid_final") == paid_final
    again = decide_payment(SETTLEMENT, "local", SPEC, transfers, pos, POLICY, T0 + later)
    assert again == decision  # pure: same inputs, same decision and digest


def test_a_timeout_says_what_was_paid_and_that_refunding_is_the_callers() -> None:
    decision = decide_payment(
        SETTLEMENT, "local", SPEC, [transfer(10, 250)], at(20), POLICY, T0 + 60_000
    )
    assert "Paid 250 of 1000 wei (250 final)" in decision.directive
    assert "refunding what was paid is the caller's" in decision.directive
    none = decide_payment(SETTLEMENT, "local", SPEC, [], at(20), POLICY, T0 + 60_000)
    assert "Nothing was paid" in none.directive


def test_the_finality_basis_is_the_latest_final_transfers() -> None:
    transfers = [transfer(10, 500), transfer(12, 500)]
    decision = decide_payment(
        SETTLEMENT, "local", SPEC, transfers, at(14, "depth_or_finalized", 10), POLICY, T0
    )
    assert decision.verdict is Verdict.FINALITY_CONFIRMED
    assert decision.evidence is not None and decision.evidence.kind == "depth"
    listed = dict(decision.evidence.facts)["transfers"]
    assert isinstance(listed, list)
    assert [t["basis"] for t in listed] == ["depth", "depth"]


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("0x" + "ab" * 20, True),
        ("0x" + "AB" * 20, True),
        ("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", True),  # EIP-55 test vector
        ("0x5aaeb6053F3E94C9b9A09f33669435E7Ef1BeAed", False),  # one letter's case wrong
        ("0x" + "ab" * 19, False),
        ("ab" * 20, False),
        (12, False),
    ],
)
def test_addresses_lower_case_or_eip55(value: object, ok: bool) -> None:
    if ok:
        assert parse_payment_address(value, "to") == str(value).lower()
    else:
        with pytest.raises(InvalidPaymentField, match=r"^to: "):
            parse_payment_address(value, "to")


def test_checksum_matches_the_eip55_vectors() -> None:
    for vector in (
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
        "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
        "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
    ):
        assert checksum_address(vector.lower()) == vector


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "1e3", " 1", "", "\uff11", 5, str(2**256)])
def test_an_amount_is_a_positive_decimal_string(value: object) -> None:
    with pytest.raises(InvalidPaymentField, match=r"^amount: "):
        parse_amount(value)


def test_a_large_amount_keeps_every_digit() -> None:
    assert parse_amount(str(2**255 + 1)) == 2**255 + 1
