"""The deposit decision (guard/deposit.py), pure: a deposit whose transfer a reorg took out
waits for it to come back, and fails on evidence ``reorged_out`` once its deadline passes
without it; a deposit with nothing counted and no known loss times out as before."""

from __future__ import annotations

from guard.deposit import AWAITING_REINCLUSION, REORGED_OUT, decide_deposit, lost_transfer
from guard.payment import NATIVE, PaymentSpec, RulePosition, Transfer
from guard.settlement import (
    Evidence,
    Settlement,
    SettlementPolicy,
    TransitionKind,
    Verdict,
    settle_transition,
)
from guard.types import SettlementId, UnixMillis

SID = "dep_0123456789abcdef01234567"
TO = "0x" + "de" * 20
FROM = "0x" + "a1" * 20
TX = "0x" + "11" * 32
OLD = "0x" + "22" * 32
SPEC = PaymentSpec(TO, NATIVE, 1_000, FROM)
SETTLEMENT = Settlement(SettlementId(SID), True, UnixMillis(1_000), 10_000)
POLICY = SettlementPolicy(max_wait_ms=86_400_000)
POS = RulePosition("depth", 3, 20, "0x" + "33" * 32)
DEADLINE = 11_000


def reorg_evidence(settlement_id: str = SID) -> Evidence:
    removed = {
        "settlement_id": settlement_id,
        "tx_hash": TX,
        "block_number": 17,
        "block_hash": OLD,
        "log_index": None,
        "value": "1000",
    }
    other = {**removed, "settlement_id": "dep_other", "tx_hash": "0x" + "44" * 32}
    return Evidence.of(
        "reorg",
        UnixMillis(5_000),
        depth=2,
        common_ancestor={"number": 16, "hash": "0x" + "55" * 32},
        removed=[other, removed],
    )


def test_the_lost_transfer_is_the_deposits_own_entry_of_the_reorg() -> None:
    found = lost_transfer(SID, None, reorg_evidence())
    assert found is not None
    lost, how = found
    assert lost == {
        "tx_hash": TX,
        "block_number": 17,
        "block_hash": OLD,
        "log_index": None,
        "from": None,
        "value": "1000",
    }
    assert how == {"depth": 2, "common_ancestor": {"number": 16, "hash": "0x" + "55" * 32}}
    assert lost_transfer("dep_not_in_it", None, reorg_evidence()) is None


def test_a_deposit_reorged_out_waits_then_fails_with_its_reason_at_the_deadline() -> None:
    lost = lost_transfer(SID, None, reorg_evidence())
    waiting = decide_deposit(SETTLEMENT, "local", SPEC, [], POS, POLICY, 6_000, None, lost)
    assert waiting.verdict is Verdict.AWAITING_FINALITY
    assert waiting.evidence is not None and waiting.evidence.kind == AWAITING_REINCLUSION
    # the next decision (no reorg in its block) finds the loss in the stored one
    carried = lost_transfer(SID, waiting, None)
    assert carried is not None and carried[0]["from"] == FROM
    failed = decide_deposit(SETTLEMENT, "local", SPEC, [], POS, POLICY, DEADLINE, None, carried)
    assert failed.verdict is Verdict.SETTLEMENT_FAILED
    assert failed.evidence is not None and failed.evidence.kind == REORGED_OUT
    facts = dict(failed.evidence.facts)
    assert facts["reorged"] == {**carried[0], "from": FROM}
    assert (facts["to"], facts["amount"], facts["deadline"]) == (TO, "1000", DEADLINE)
    assert f"in tx {TX}, seen in block 17 ({OLD}), was taken out by a reorg" in failed.directive
    assert settle_transition(waiting, failed).kind is TransitionKind.ADVANCED


def test_a_deposit_counted_again_is_decided_on_its_transfer_not_on_the_loss() -> None:
    back = Transfer(TX, 19, "0x" + "66" * 32, 0, None, FROM, 1_000)
    lost = lost_transfer(SID, None, reorg_evidence())
    again = decide_deposit(SETTLEMENT, "local", SPEC, [back], POS, POLICY, DEADLINE - 1, None, lost)
    assert again.verdict is Verdict.AWAITING_FINALITY
    assert again.evidence is not None and again.evidence.kind == "payment_progress"


def test_a_deposit_with_no_known_loss_times_out_as_before() -> None:
    timed = decide_deposit(SETTLEMENT, "local", SPEC, [], POS, POLICY, DEADLINE, None, None)
    assert timed.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
    assert "Nothing was counted for the deposit" in timed.directive
