"""Example tests of the settlement guard: evaluate_settlement, deadline_of, settle_transition."""

import pytest

from guard.errors import GuardError, InvalidPolicy
from guard.settlement import (
    Decision,
    Evidence,
    Observation,
    Reversal,
    Settlement,
    SettlementPolicy,
    TransitionKind,
    Verdict,
    deadline_of,
    evaluate_settlement,
    settle_transition,
)
from guard.types import SettlementId, UnixMillis

T0 = UnixMillis(1_700_000_000_000)
TIMEOUT_MS = 60_000
POLICY = SettlementPolicy(max_wait_ms=600_000)
DEADLINE = UnixMillis(T0 + TIMEOUT_MS)

BLOCK_A = "0x" + "aa" * 32
BLOCK_B = "0x" + "bb" * 32
NOTHING = Observation()


def settlement(
    *, initiated: bool = True, initiated_at: int = T0, timeout_ms: int = TIMEOUT_MS
) -> Settlement:
    return Settlement(
        settlement_id=SettlementId("s-1"),
        initiated=initiated,
        initiated_at=UnixMillis(initiated_at),
        timeout_ms=timeout_ms,
    )


def depth(block_hash: str = BLOCK_A, observed_at: int = T0 + 30_000) -> Evidence:
    return Evidence.of(
        "depth", UnixMillis(observed_at), block_number=812, block_hash=block_hash, depth=12
    )


def included(observed_at: int = T0 + 5_000) -> Evidence:
    return Evidence.of("included", UnixMillis(observed_at), block_number=812, depth=1)


def reverted(observed_at: int = T0 + 20_000) -> Evidence:
    return Evidence.of("reverted", UnixMillis(observed_at), block_number=812, status=0)


def evaluate(
    observation: Observation = NOTHING,
    now: int = T0 + 1_000,
    s: Settlement | None = None,
    policy: SettlementPolicy = POLICY,
) -> Decision:
    return evaluate_settlement(s or settlement(), observation, policy, UnixMillis(now))


# --- the five verdicts -------------------------------------------------------------------


def test_no_settlement() -> None:
    decision = evaluate(Observation(finality=depth()), s=settlement(initiated=False))
    assert decision.verdict is Verdict.NO_SETTLEMENT
    assert decision.deadline is None
    assert decision.elapsed_ms == 0
    assert decision.remaining_ms == 0
    assert decision.evidence is None
    assert decision.directive.startswith("PROCEED")
    assert not decision.verdict.terminal


def test_no_settlement_ignores_timeout() -> None:
    # Nothing was started, so a zero timeout has nothing to bound.
    decision = evaluate(s=settlement(initiated=False, timeout_ms=0))
    assert decision.verdict is Verdict.NO_SETTLEMENT


def test_awaiting_with_nothing_observed() -> None:
    decision = evaluate(now=T0 + 1_000)
    assert decision.verdict is Verdict.AWAITING_FINALITY
    assert decision.deadline == DEADLINE
    assert decision.elapsed_ms == 1_000
    assert decision.remaining_ms == TIMEOUT_MS - 1_000
    assert decision.evidence is None
    assert decision.directive.startswith("WAIT")
    assert not decision.verdict.terminal


def test_awaiting_carries_progress_but_inclusion_never_confirms() -> None:
    progress = included()
    decision = evaluate(Observation(progress=progress), now=T0 + 10_000)
    assert decision.verdict is Verdict.AWAITING_FINALITY
    assert decision.evidence == progress


def test_finality_confirmed() -> None:
    finality = depth()
    decision = evaluate(Observation(finality=finality, progress=included()), now=T0 + 30_000)
    assert decision.verdict is Verdict.FINALITY_CONFIRMED
    assert decision.evidence == finality
    assert decision.remaining_ms == 0
    assert decision.elapsed_ms == 30_000
    assert decision.deadline == DEADLINE
    assert decision.directive.startswith("COMMIT")
    assert decision.verdict.terminal


def test_settlement_failed() -> None:
    failure = reverted()
    decision = evaluate(Observation(failure=failure), now=T0 + 20_000)
    assert decision.verdict is Verdict.SETTLEMENT_FAILED
    assert decision.evidence == failure
    assert decision.remaining_ms == 0
    assert decision.directive.startswith("DISCARD")
    assert decision.verdict.terminal


def test_timeout_treated_as_failure() -> None:
    progress = included()
    decision = evaluate(Observation(progress=progress), now=DEADLINE + 5)
    assert decision.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
    assert decision.evidence == progress
    assert decision.remaining_ms == 0
    assert decision.elapsed_ms == TIMEOUT_MS + 5
    assert decision.directive.startswith("DISCARD")
    assert decision.verdict.terminal


# --- precedence ---------------------------------------------------------------------------


def test_failure_dominates_finality() -> None:
    failure = reverted()
    decision = evaluate(Observation(finality=depth(), failure=failure), now=T0 + 30_000)
    assert decision.verdict is Verdict.SETTLEMENT_FAILED
    assert decision.evidence == failure


def test_failure_dominates_timeout() -> None:
    decision = evaluate(Observation(failure=reverted()), now=DEADLINE + 1)
    assert decision.verdict is Verdict.SETTLEMENT_FAILED


def test_finality_evidence_observed_at_zero_still_confirms() -> None:
    # The reference sketch required a truthy finality epoch, so an instant of 0 read as
    # "no finality". 0 is a valid instant.
    s = settlement(initiated_at=0)
    finality = Evidence.of("finalized", UnixMillis(0), block_number=0, block_hash=BLOCK_A)
    decision = evaluate(Observation(finality=finality), now=0, s=s)
    assert decision.verdict is Verdict.FINALITY_CONFIRMED
    assert decision.evidence is not None
    assert decision.evidence.observed_at == 0


def test_finality_evidence_without_facts_confirms() -> None:
    decision = evaluate(Observation(finality=Evidence("finalized", UnixMillis(0))))
    assert decision.verdict is Verdict.FINALITY_CONFIRMED


# --- the timeout boundary -----------------------------------------------------------------


def test_timeout_boundary_is_inclusive() -> None:
    at_deadline = evaluate(now=DEADLINE)
    assert at_deadline.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
    assert at_deadline.remaining_ms == 0
    assert at_deadline.elapsed_ms == TIMEOUT_MS


def test_one_millisecond_before_deadline_is_awaiting() -> None:
    before = evaluate(now=DEADLINE - 1)
    assert before.verdict is Verdict.AWAITING_FINALITY
    assert before.remaining_ms == 1
    assert before.elapsed_ms == TIMEOUT_MS - 1


def test_finality_at_deadline_confirms() -> None:
    decision = evaluate(Observation(finality=depth()), now=DEADLINE)
    assert decision.verdict is Verdict.FINALITY_CONFIRMED


def test_now_before_initiation_has_zero_elapsed() -> None:
    decision = evaluate(now=T0 - 500)
    assert decision.verdict is Verdict.AWAITING_FINALITY
    assert decision.elapsed_ms == 0
    assert decision.remaining_ms > 0


# --- the deadline -------------------------------------------------------------------------


def test_deadline_uses_the_settlement_timeout_when_shorter() -> None:
    s = settlement(timeout_ms=1_000)
    assert deadline_of(s, SettlementPolicy(max_wait_ms=5_000)) == T0 + 1_000


def test_deadline_uses_the_policy_max_wait_when_shorter() -> None:
    s = settlement(timeout_ms=5_000)
    policy = SettlementPolicy(max_wait_ms=1_000)
    assert deadline_of(s, policy) == T0 + 1_000
    assert evaluate(now=T0 + 999, s=s, policy=policy).remaining_ms == 1
    assert evaluate(now=T0 + 1_000, s=s, policy=policy).verdict is (
        Verdict.TIMEOUT_TREATED_AS_FAILURE
    )


def test_deadline_equal_limits() -> None:
    s = settlement(timeout_ms=2_000)
    assert deadline_of(s, SettlementPolicy(max_wait_ms=2_000)) == T0 + 2_000


def test_deadline_from_initiation_at_zero() -> None:
    assert deadline_of(settlement(initiated_at=0, timeout_ms=7), POLICY) == 7


# --- invalid policy and timeout -----------------------------------------------------------


@pytest.mark.parametrize("max_wait_ms", [0, -1, -600_000])
def test_policy_with_non_positive_max_wait_is_refused(max_wait_ms: int) -> None:
    with pytest.raises(InvalidPolicy, match="max_wait_ms"):
        SettlementPolicy(max_wait_ms=max_wait_ms)


@pytest.mark.parametrize("timeout_ms", [0, -1])
def test_settlement_with_non_positive_timeout_is_refused(timeout_ms: int) -> None:
    s = settlement(timeout_ms=timeout_ms)
    with pytest.raises(InvalidPolicy, match="timeout_ms"):
        deadline_of(s, POLICY)
    with pytest.raises(InvalidPolicy, match="timeout_ms"):
        evaluate(s=s)
    # Even with decisive evidence: the timeout is checked before any verdict is issued.
    with pytest.raises(InvalidPolicy):
        evaluate(Observation(finality=depth()), s=s)


def test_invalid_policy_is_a_guard_error_and_value_error() -> None:
    with pytest.raises(GuardError):
        SettlementPolicy(max_wait_ms=0)
    with pytest.raises(ValueError):
        SettlementPolicy(max_wait_ms=0)


# --- digests ------------------------------------------------------------------------------


def test_digest_shape() -> None:
    decision = evaluate()
    assert decision.digest.startswith("sha256:")
    assert len(decision.digest) == len("sha256:") + 64
    int(decision.digest.removeprefix("sha256:"), 16)


def test_digest_equal_for_equal_inputs() -> None:
    first = evaluate(Observation(finality=depth()), now=T0 + 30_000)
    second = evaluate(Observation(finality=depth()), now=T0 + 30_000)
    assert first.digest == second.digest
    assert first == second


def test_digest_independent_of_fact_order() -> None:
    ordered = Evidence.of("depth", UnixMillis(1), a=1, b=2)
    reordered = Evidence.of("depth", UnixMillis(1), b=2, a=1)
    assert ordered == reordered
    assert (
        evaluate(Observation(finality=ordered)).digest
        == evaluate(Observation(finality=reordered)).digest
    )


def test_digest_differs_when_only_the_evidence_differs() -> None:
    on_a = evaluate(Observation(finality=depth(BLOCK_A)), now=T0 + 30_000)
    on_b = evaluate(Observation(finality=depth(BLOCK_B)), now=T0 + 30_000)
    assert on_a.verdict is on_b.verdict is Verdict.FINALITY_CONFIRMED
    assert on_a.digest != on_b.digest


EV = Evidence.of("depth", UnixMillis(1), depth=3)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (EV, Evidence.of("depth", UnixMillis(2), depth=3)),
        (EV, Evidence.of("finalized", UnixMillis(1), depth=3)),
        (EV, Evidence.of("depth", UnixMillis(1), depth=4)),
    ],
    ids=["observed_at", "kind", "facts"],
)
def test_digest_binds_every_part_of_the_evidence(left: Evidence, right: Evidence) -> None:
    for slot in ("finality", "failure", "progress"):
        one = evaluate(Observation(**{slot: left}))
        two = evaluate(Observation(**{slot: right}))
        assert one.verdict is two.verdict
        assert one.digest != two.digest, slot


def test_digest_differs_for_failure_evidence_on_different_blocks() -> None:
    one = Evidence.of("reverted", UnixMillis(T0), block_hash=BLOCK_A)
    two = Evidence.of("reverted", UnixMillis(T0), block_hash=BLOCK_B)
    assert evaluate(Observation(failure=one)).digest != evaluate(Observation(failure=two)).digest


def test_digest_differs_by_verdict_on_the_same_evidence() -> None:
    evidence = depth()
    confirmed = evaluate(Observation(finality=evidence))
    failed = evaluate(Observation(failure=evidence))
    assert confirmed.digest != failed.digest


def test_digest_binds_the_settlement() -> None:
    base = evaluate(Observation(finality=depth()))
    other_id = Settlement(SettlementId("s-2"), True, T0, TIMEOUT_MS)
    assert evaluate(Observation(finality=depth()), s=other_id).digest != base.digest
    assert evaluate(Observation(finality=depth()), s=settlement(timeout_ms=61_000)).digest != (
        base.digest
    )


def test_awaiting_digest_moves_with_time_but_timeout_digest_does_not() -> None:
    assert evaluate(now=T0 + 1).digest != evaluate(now=T0 + 2).digest
    assert evaluate(now=DEADLINE).digest == evaluate(now=DEADLINE + 1_000).digest


# --- transitions --------------------------------------------------------------------------

AWAITING = evaluate(now=T0 + 1_000)
AWAITING_LATER = evaluate(Observation(progress=included()), now=T0 + 10_000)
CONFIRMED = evaluate(Observation(finality=depth(BLOCK_A)), now=T0 + 30_000)
CONFIRMED_ON_B = evaluate(Observation(finality=depth(BLOCK_B)), now=T0 + 40_000)
FAILED = evaluate(Observation(failure=reverted()), now=T0 + 20_000)
TIMED_OUT = evaluate(Observation(progress=included()), now=DEADLINE)
LATE_CONFIRMED = evaluate(
    Observation(finality=depth(observed_at=DEADLINE + 10_000)), now=DEADLINE + 10_000
)
REORG = Reversal(
    reason="reorg of depth 20 past block 812",
    evidence=Evidence.of(
        "reorg", UnixMillis(T0 + 50_000), old_hash=BLOCK_A, new_hash=BLOCK_B, depth=20
    ),
)


def test_first_decision_advances() -> None:
    for fresh in (AWAITING, CONFIRMED, FAILED, TIMED_OUT):
        transition = settle_transition(None, fresh)
        assert transition.kind is TransitionKind.ADVANCED
        assert transition.decision == fresh
        assert not transition.finality_violation


def test_awaiting_to_awaiting_is_unchanged_and_keeps_the_fresh_progress() -> None:
    transition = settle_transition(AWAITING, AWAITING_LATER)
    assert transition.kind is TransitionKind.UNCHANGED
    assert transition.decision == AWAITING_LATER


@pytest.mark.parametrize("fresh", [CONFIRMED, FAILED, TIMED_OUT])
def test_awaiting_to_terminal_advances(fresh: Decision) -> None:
    transition = settle_transition(AWAITING, fresh)
    assert transition.kind is TransitionKind.ADVANCED
    assert transition.decision == fresh
    assert not transition.finality_violation


def test_late_finality_keeps_the_timeout() -> None:
    assert LATE_CONFIRMED.verdict is Verdict.FINALITY_CONFIRMED
    transition = settle_transition(TIMED_OUT, LATE_CONFIRMED)
    assert transition.kind is TransitionKind.LATE_FINALITY
    assert transition.decision == TIMED_OUT
    assert transition.decision.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
    assert not transition.finality_violation


@pytest.mark.parametrize(
    ("previous", "fresh"),
    [
        (CONFIRMED, AWAITING),
        (CONFIRMED, FAILED),
        (CONFIRMED, TIMED_OUT),
        (FAILED, AWAITING),
        (FAILED, CONFIRMED),
        (FAILED, TIMED_OUT),
        (TIMED_OUT, AWAITING),
        (TIMED_OUT, FAILED),
    ],
    ids=lambda d: d.verdict.value,
)
def test_terminal_is_held_without_reversal(previous: Decision, fresh: Decision) -> None:
    transition = settle_transition(previous, fresh)
    assert transition.kind is TransitionKind.HELD
    assert transition.decision == previous
    assert not transition.finality_violation


def test_terminal_same_verdict_is_unchanged_and_keeps_the_stored_decision() -> None:
    transition = settle_transition(CONFIRMED, CONFIRMED_ON_B)
    assert transition.kind is TransitionKind.UNCHANGED
    assert transition.decision == CONFIRMED
    assert transition.decision.digest == CONFIRMED.digest


def test_reversal_of_confirmed_is_a_finality_violation() -> None:
    transition = settle_transition(CONFIRMED, AWAITING_LATER, REORG)
    assert transition.kind is TransitionKind.REVERSED
    assert transition.decision == AWAITING_LATER
    assert transition.finality_violation


@pytest.mark.parametrize("previous", [FAILED, TIMED_OUT], ids=lambda d: d.verdict.value)
def test_reversal_of_other_terminal_is_not_a_finality_violation(previous: Decision) -> None:
    transition = settle_transition(previous, AWAITING_LATER, REORG)
    assert transition.kind is TransitionKind.REVERSED
    assert transition.decision == AWAITING_LATER
    assert not transition.finality_violation


def test_reversal_of_non_terminal_is_an_ordinary_transition() -> None:
    transition = settle_transition(AWAITING, CONFIRMED, REORG)
    assert transition.kind is TransitionKind.ADVANCED
    assert not transition.finality_violation
    transition = settle_transition(None, CONFIRMED, REORG)
    assert transition.kind is TransitionKind.ADVANCED
    assert not transition.finality_violation
