"""Example tests of the settlement guard: evaluate_settlement, deadline_of, settle_transition."""

import pytest

from guard.canonical import MAX_SAFE_INTEGER, CanonicalError
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
    decision_as_json,
    decision_from_json,
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
    assert decision.late_finality is None
    assert decision.remaining_ms == 0
    assert decision.elapsed_ms == TIMEOUT_MS + 5
    assert decision.directive.startswith("DISCARD")
    assert "reconcile" not in decision.directive
    assert decision.verdict.terminal


def test_only_a_timeout_carries_late_finality() -> None:
    for decision in (
        evaluate(),
        evaluate(Observation(finality=depth()), now=T0 + 30_000),
        evaluate(Observation(failure=reverted(), finality=depth(observed_at=DEADLINE))),
        evaluate(Observation(finality=depth()), s=settlement(initiated=False)),
    ):
        assert decision.late_finality is None, decision.verdict


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


def test_finality_observed_before_the_deadline_confirms_when_evaluated_at_it() -> None:
    # depth() was observed at T0 + 30 s, well before the deadline.
    decision = evaluate(Observation(finality=depth()), now=DEADLINE)
    assert decision.verdict is Verdict.FINALITY_CONFIRMED
    assert decision.late_finality is None


@pytest.mark.parametrize("now", [DEADLINE, DEADLINE + 1, DEADLINE + 3_600_000])
def test_finality_observed_one_ms_before_the_deadline_confirms_however_late_evaluated(
    now: int,
) -> None:
    finality = depth(observed_at=DEADLINE - 1)
    decision = evaluate(Observation(finality=finality, progress=included()), now=now)
    assert decision.verdict is Verdict.FINALITY_CONFIRMED
    assert decision.evidence == finality
    assert decision.late_finality is None
    assert decision.remaining_ms == 0
    assert decision.elapsed_ms == now - T0


@pytest.mark.parametrize("observed_at", [DEADLINE, DEADLINE + 1, DEADLINE + 10_000])
def test_finality_observed_at_or_after_the_deadline_is_a_timeout_with_late_finality(
    observed_at: int,
) -> None:
    # The observation boundary is inclusive too: observed *at* the deadline is late.
    finality = depth(observed_at=observed_at)
    progress = included()
    decision = evaluate(Observation(finality=finality, progress=progress), now=observed_at)
    assert decision.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
    assert decision.evidence == progress
    assert decision.late_finality == finality
    assert decision.remaining_ms == 0
    assert decision.directive.startswith("DISCARD")
    assert "reconcile" in decision.directive


def test_finality_evaluated_before_the_deadline_confirms() -> None:
    # One millisecond before the deadline the waiting budget is not spent: finality confirms.
    finality = depth(observed_at=DEADLINE - 1)
    decision = evaluate(Observation(finality=finality), now=DEADLINE - 1)
    assert decision.verdict is Verdict.FINALITY_CONFIRMED
    assert decision.evidence == finality


def test_failure_dominates_late_finality() -> None:
    failure = reverted(observed_at=DEADLINE + 1)
    observation = Observation(finality=depth(observed_at=DEADLINE + 1), failure=failure)
    decision = evaluate(observation, now=DEADLINE + 1)
    assert decision.verdict is Verdict.SETTLEMENT_FAILED
    assert decision.evidence == failure
    assert decision.late_finality is None


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
    late = Observation(finality=depth(observed_at=DEADLINE))
    assert evaluate(late, now=DEADLINE).digest == evaluate(late, now=DEADLINE + 1_000).digest


def test_digest_binds_the_late_finality() -> None:
    plain = evaluate(Observation(progress=included()), now=DEADLINE + 10_000)
    late_a = evaluate(
        Observation(finality=depth(BLOCK_A, DEADLINE), progress=included()), now=DEADLINE + 10_000
    )
    late_b = evaluate(
        Observation(finality=depth(BLOCK_B, DEADLINE), progress=included()), now=DEADLINE + 10_000
    )
    later_a = evaluate(
        Observation(finality=depth(BLOCK_A, DEADLINE + 1), progress=included()),
        now=DEADLINE + 10_000,
    )
    assert plain.verdict is late_a.verdict is late_b.verdict is later_a.verdict
    assert len({plain.digest, late_a.digest, late_b.digest, later_a.digest}) == 4


def test_integers_beyond_2_53_in_facts_are_refused_not_digested() -> None:
    # Amounts in wei overflow an IEEE double: they go as decimal strings.
    wei = 2**53
    huge = Evidence.of("depth", UnixMillis(T0), value=wei)
    with pytest.raises(CanonicalError, match=r"2\*\*53"):
        evaluate(Observation(finality=huge))
    as_string = Evidence.of("depth", UnixMillis(T0), value=str(wei))
    assert evaluate(Observation(finality=as_string)).verdict is Verdict.FINALITY_CONFIRMED
    safe = Evidence.of("depth", UnixMillis(T0), value=MAX_SAFE_INTEGER)
    assert evaluate(Observation(finality=safe)).verdict is Verdict.FINALITY_CONFIRMED


# --- JSON form ----------------------------------------------------------------------------


def test_decision_json_round_trips_late_finality() -> None:
    late = depth(observed_at=DEADLINE + 10)
    decision = evaluate(Observation(finality=late, progress=included()), now=DEADLINE + 10)
    as_json = decision_as_json(decision)
    assert as_json["late_finality"] == late.as_json()
    assert decision_from_json(as_json) == decision
    assert decision_from_json(as_json).late_finality == late


def test_decision_json_without_late_finality() -> None:
    decision = evaluate(Observation(finality=depth()), now=T0 + 30_000)
    as_json = decision_as_json(decision)
    assert as_json["late_finality"] is None
    assert decision_from_json(as_json) == decision
    # A decision stored before the field existed reads back without late finality.
    del as_json["late_finality"]
    assert decision_from_json(as_json) == decision


# --- transitions --------------------------------------------------------------------------

AWAITING = evaluate(now=T0 + 1_000)
AWAITING_LATER = evaluate(Observation(progress=included()), now=T0 + 10_000)
CONFIRMED = evaluate(Observation(finality=depth(BLOCK_A)), now=T0 + 30_000)
CONFIRMED_ON_B = evaluate(Observation(finality=depth(BLOCK_B)), now=T0 + 40_000)
FAILED = evaluate(Observation(failure=reverted()), now=T0 + 20_000)
TIMED_OUT = evaluate(Observation(progress=included()), now=DEADLINE)
# A fresh timeout that carries finality observed after the deadline.
LATE = evaluate(
    Observation(finality=depth(observed_at=DEADLINE + 10_000), progress=included()),
    now=DEADLINE + 10_000,
)
# A fresh confirmation, evaluated after the deadline, of finality observed before it.
CONFIRMED_LATE_EVALUATED = evaluate(
    Observation(finality=depth(observed_at=DEADLINE - 1)), now=DEADLINE + 10_000
)
NAMED = {
    "awaiting": AWAITING,
    "awaiting_later": AWAITING_LATER,
    "confirmed": CONFIRMED,
    "confirmed_on_b": CONFIRMED_ON_B,
    "failed": FAILED,
    "timed_out": TIMED_OUT,
    "late": LATE,
    "confirmed_late_evaluated": CONFIRMED_LATE_EVALUATED,
}


def name(value: object) -> str:
    """Readable test ids: the fixture's name for a decision, the value for a kind."""
    for label, decision in NAMED.items():
        if value is decision:
            return label
    return str(getattr(value, "value", value))


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


@pytest.mark.parametrize("fresh", [CONFIRMED, FAILED, TIMED_OUT], ids=name)
def test_awaiting_to_terminal_advances(fresh: Decision) -> None:
    transition = settle_transition(AWAITING, fresh)
    assert transition.kind is TransitionKind.ADVANCED
    assert transition.decision == fresh
    assert not transition.finality_violation


def test_fixtures_have_the_verdicts_the_transition_tests_assume() -> None:
    assert LATE.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
    assert LATE.late_finality is not None
    assert TIMED_OUT.late_finality is None
    assert CONFIRMED_LATE_EVALUATED.verdict is Verdict.FINALITY_CONFIRMED


@pytest.mark.parametrize("fresh", [LATE, CONFIRMED_LATE_EVALUATED, CONFIRMED], ids=name)
def test_late_finality_keeps_the_timeout(fresh: Decision) -> None:
    transition = settle_transition(TIMED_OUT, fresh)
    assert transition.kind is TransitionKind.LATE_FINALITY
    assert transition.decision == TIMED_OUT
    assert transition.decision.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
    assert not transition.finality_violation


@pytest.mark.parametrize("previous", [None, AWAITING], ids=["none", "awaiting"])
def test_first_terminal_decision_with_late_finality_is_late_finality(
    previous: Decision | None,
) -> None:
    # The timeout and the late finality are decided together: the fresh timeout is stored
    # (with its late_finality), and the kind says someone must reconcile.
    transition = settle_transition(previous, LATE)
    assert transition.kind is TransitionKind.LATE_FINALITY
    assert transition.decision == LATE
    assert transition.decision.late_finality == LATE.late_finality
    assert not transition.finality_violation


@pytest.mark.parametrize("previous", [FAILED, CONFIRMED], ids=name)
def test_late_finality_after_another_terminal_verdict_is_held(previous: Decision) -> None:
    transition = settle_transition(previous, LATE)
    assert transition.kind is TransitionKind.HELD
    assert transition.decision == previous
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
        (FAILED, LATE),
        (CONFIRMED, LATE),
    ],
    ids=name,
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


@pytest.mark.parametrize(
    "fresh", [AWAITING_LATER, CONFIRMED_ON_B, FAILED, TIMED_OUT, LATE], ids=name
)
def test_reversal_of_confirmed_is_a_finality_violation(fresh: Decision) -> None:
    transition = settle_transition(CONFIRMED, fresh, REORG)
    assert transition.kind is TransitionKind.REVERSED
    assert transition.decision == fresh
    assert transition.finality_violation


@pytest.mark.parametrize(
    ("previous", "fresh", "kind"),
    [
        (FAILED, AWAITING_LATER, TransitionKind.HELD),
        (FAILED, CONFIRMED, TransitionKind.HELD),
        (FAILED, TIMED_OUT, TransitionKind.HELD),
        (FAILED, LATE, TransitionKind.HELD),
        (FAILED, FAILED, TransitionKind.UNCHANGED),
        (TIMED_OUT, AWAITING_LATER, TransitionKind.HELD),
        (TIMED_OUT, FAILED, TransitionKind.HELD),
        (TIMED_OUT, TIMED_OUT, TransitionKind.UNCHANGED),
        (TIMED_OUT, CONFIRMED, TransitionKind.LATE_FINALITY),
        (TIMED_OUT, CONFIRMED_LATE_EVALUATED, TransitionKind.LATE_FINALITY),
        (TIMED_OUT, LATE, TransitionKind.LATE_FINALITY),
    ],
    ids=name,
)
def test_reversal_of_a_failure_or_timeout_is_ignored(
    previous: Decision, fresh: Decision, kind: TransitionKind
) -> None:
    # A failure or a timeout may already have been discarded: never turned into a commit.
    transition = settle_transition(previous, fresh, REORG)
    assert transition.kind is kind
    assert transition.decision == previous
    assert transition.decision.verdict is not Verdict.FINALITY_CONFIRMED
    assert not transition.finality_violation
    assert transition == settle_transition(previous, fresh)


def test_reversal_of_non_terminal_is_an_ordinary_transition() -> None:
    transition = settle_transition(AWAITING, CONFIRMED, REORG)
    assert transition.kind is TransitionKind.ADVANCED
    assert not transition.finality_violation
    transition = settle_transition(None, CONFIRMED, REORG)
    assert transition.kind is TransitionKind.ADVANCED
    assert not transition.finality_violation
