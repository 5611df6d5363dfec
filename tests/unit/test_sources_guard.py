"""The source vocabulary in guard/: how a source's status becomes a guard observation, how a
lost worker ends the wait, and what a reference may be."""

from __future__ import annotations

import pytest

from guard.canonical import CanonicalError
from guard.settlement import (
    Evidence,
    Settlement,
    SettlementPolicy,
    TransitionKind,
    Verdict,
    settle_transition,
)
from guard.source import (
    MAX_REF_LENGTH,
    InvalidRef,
    SourceObservation,
    SourceStatus,
    check_ref_text,
    evaluate_source,
    objects_digest,
    observation_of,
    reversal_of,
    same_evidence,
)
from guard.types import SettlementId, UnixMillis

T0 = UnixMillis(1_700_000_000_000)
SETTLEMENT = Settlement(SettlementId("stl_x"), True, T0, 60_000)
POLICY = SettlementPolicy(max_wait_ms=3_600_000)


def ev(kind: str, at: int = T0, **facts: object) -> Evidence:
    return Evidence.of(kind, UnixMillis(at), **facts)


@pytest.mark.parametrize(
    ("status", "slot"),
    [
        (SourceStatus.FINAL, "finality"),
        (SourceStatus.FAILED, "failure"),
        (SourceStatus.REVERSED, "failure"),
        (SourceStatus.ACCEPTED, "progress"),
        (SourceStatus.INITIATED, "progress"),
        (SourceStatus.UNKNOWN, "progress"),
    ],
)
def test_each_status_lands_in_one_observation_slot(status: SourceStatus, slot: str) -> None:
    evidence = ev("x", n=1)
    observation = observation_of(SourceObservation("r", status, evidence))
    assert {
        "finality": observation.finality,
        "failure": observation.failure,
        "progress": observation.progress,
    } == {s: (evidence if s == slot else None) for s in ("finality", "failure", "progress")}


def test_only_unknown_may_come_without_evidence() -> None:
    SourceObservation("r", SourceStatus.UNKNOWN)
    with pytest.raises(ValueError, match="needs evidence"):
        SourceObservation("r", SourceStatus.ACCEPTED)


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (SourceStatus.FINAL, Verdict.FINALITY_CONFIRMED),
        (SourceStatus.FAILED, Verdict.SETTLEMENT_FAILED),
        (SourceStatus.REVERSED, Verdict.SETTLEMENT_FAILED),
        (SourceStatus.ACCEPTED, Verdict.AWAITING_FINALITY),
        (SourceStatus.INITIATED, Verdict.AWAITING_FINALITY),
    ],
)
def test_statuses_give_the_guards_verdicts(status: SourceStatus, verdict: Verdict) -> None:
    decision = evaluate_source(SETTLEMENT, SourceObservation("r", status, ev("x")), POLICY, T0)
    assert decision.verdict is verdict


def test_accepted_is_never_a_commit_and_times_out_at_the_deadline() -> None:
    accepted = SourceObservation("r", SourceStatus.ACCEPTED, ev("payment_succeeded"))
    before = evaluate_source(SETTLEMENT, accepted, POLICY, UnixMillis(T0 + 59_999))
    at = evaluate_source(SETTLEMENT, accepted, POLICY, UnixMillis(T0 + 60_000))
    assert (before.verdict, before.remaining_ms) == (Verdict.AWAITING_FINALITY, 1)
    assert at.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
    assert at.evidence == accepted.evidence


def test_a_reversal_after_confirmation_is_a_finality_violation() -> None:
    confirmed = evaluate_source(
        SETTLEMENT, SourceObservation("r", SourceStatus.FINAL, ev("funds_available")), POLICY, T0
    )
    refund = SourceObservation("r", SourceStatus.REVERSED, ev("refunded", refunds=["re_1"]))
    fresh = evaluate_source(SETTLEMENT, refund, POLICY, UnixMillis(T0 + 5))
    reversal = reversal_of(refund)
    assert reversal is not None and reversal.evidence == refund.evidence
    transition = settle_transition(confirmed, fresh, reversal)
    assert transition.kind is TransitionKind.REVERSED and transition.finality_violation
    assert transition.decision.verdict is Verdict.SETTLEMENT_FAILED


def test_a_reversal_before_confirmation_is_a_plain_failure() -> None:
    awaiting = evaluate_source(
        SETTLEMENT,
        SourceObservation("r", SourceStatus.ACCEPTED, ev("payment_succeeded")),
        POLICY,
        T0,
    )
    refund = SourceObservation("r", SourceStatus.REVERSED, ev("refunded"))
    fresh = evaluate_source(SETTLEMENT, refund, POLICY, UnixMillis(T0 + 5))
    transition = settle_transition(awaiting, fresh, reversal_of(refund))
    assert transition.kind is TransitionKind.ADVANCED and not transition.finality_violation
    assert transition.decision.verdict is Verdict.SETTLEMENT_FAILED


def test_only_reversed_observations_carry_a_reversal() -> None:
    for status in SourceStatus:
        obs = SourceObservation("r", status, ev("x"))
        assert (reversal_of(obs) is not None) is (status is SourceStatus.REVERSED)


def test_a_cutoff_ends_the_wait_early_and_says_when() -> None:
    cutoff = UnixMillis(T0 + 10_000)
    lost = SourceObservation("r", SourceStatus.INITIATED, ev("worker_lost"), cutoff)
    before = evaluate_source(SETTLEMENT, lost, POLICY, UnixMillis(T0 + 9_000))
    after = evaluate_source(SETTLEMENT, lost, POLICY, UnixMillis(T0 + 10_000))
    assert (before.verdict, before.deadline, before.remaining_ms) == (
        Verdict.AWAITING_FINALITY,
        cutoff,
        1_000,
    )
    assert (after.verdict, after.deadline) == (Verdict.TIMEOUT_TREATED_AS_FAILURE, cutoff)
    assert after.evidence is not None and after.evidence.kind == "worker_lost"


def test_a_cutoff_never_extends_the_deadline_nor_overrides_an_outcome() -> None:
    late = SourceObservation("r", SourceStatus.INITIATED, ev("x"), UnixMillis(T0 + 10**9))
    assert evaluate_source(SETTLEMENT, late, POLICY, T0).deadline == T0 + 60_000
    # A worker lost before the registration: the wait is 1 ms, the shortest a policy allows.
    early = SourceObservation("r", SourceStatus.INITIATED, ev("x"), UnixMillis(T0 - 5))
    decided = evaluate_source(SETTLEMENT, early, POLICY, UnixMillis(T0 + 1))
    assert (decided.verdict, decided.deadline) == (Verdict.TIMEOUT_TREATED_AS_FAILURE, T0 + 1)
    done = SourceObservation("r", SourceStatus.FINAL, ev("job_finished"), UnixMillis(T0 - 5))
    assert evaluate_source(SETTLEMENT, done, POLICY, T0).verdict is Verdict.FINALITY_CONFIRMED


def test_same_evidence_ignores_when_it_was_observed() -> None:
    assert same_evidence(ev("a", T0, x=1), ev("a", T0 + 99, x=1))
    assert not same_evidence(ev("a", T0, x=1), ev("a", T0, x=2))
    assert not same_evidence(ev("a", T0, x=1), ev("b", T0, x=1))
    assert same_evidence(None, None) and not same_evidence(None, ev("a"))


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("x" * (MAX_REF_LENGTH + 1), "at most 66 characters"),
        ("", "must not be empty"),
        ("has space", "printable ASCII"),
        ("tab\t", "printable ASCII"),
        ("é", "printable ASCII"),
        (42, "must be a string"),
    ],
)
def test_bad_refs_are_refused_naming_the_field(ref: object, reason: str) -> None:
    with pytest.raises(InvalidRef, match=reason) as caught:
        check_ref_text(ref)
    assert caught.value.field == "ref" and str(caught.value).startswith("ref: ")


def test_refs_up_to_66_characters_pass() -> None:
    assert check_ref_text("a" * MAX_REF_LENGTH) == "a" * MAX_REF_LENGTH


def test_objects_digest_accepts_vendor_floats_and_huge_integers() -> None:
    a = objects_digest({"rate": 1.25, "big": 2**60, "nested": [{"b": 1, "a": 2}]})
    b = objects_digest({"nested": [{"a": 2, "b": 1}], "big": 2**60, "rate": 1.25})
    assert a == b and a.startswith("sha256:")
    assert objects_digest({"rate": 1.25}) != objects_digest({"rate": 1.5})
    with pytest.raises(CanonicalError):
        objects_digest({"odd": object()})
