"""The handoff guard's decision boundary, including the seed's edge cases and its fixes."""

from __future__ import annotations

import dataclasses

import pytest

from guard.handoff import (
    HandoffState,
    HandoffVerdict,
    RecoveryOutcome,
    evaluate_handoff,
    exception_holds,
)

CLEAN = RecoveryOutcome("delivery:1", "resend_with_same_idempotency_key", "pending", False)
DIRTY = RecoveryOutcome("delivery:1", "probe", "half-applied", True)

MID = HandoffState(
    transaction_id="local",
    steps_total=3,
    steps_completed=1,
    in_flight_observed=frozenset({"delivery:1"}),
    checkpoint_digest="sha256:ab",
    in_flight_registry=frozenset({"delivery:1"}),
    lock_held=True,
)


def verdict(state: HandoffState) -> HandoffVerdict:
    return evaluate_handoff(state).verdict


def test_fully_tracked_mid_transaction_handoff_is_safe() -> None:
    decision = evaluate_handoff(MID)
    assert decision.verdict is HandoffVerdict.HANDOFF_SAFE
    assert not decision.exception_applied
    assert decision.digest.startswith("sha256:")


def test_not_started_is_no_transaction() -> None:
    """The seed's gate 1: nothing completed and nothing in flight."""
    state = dataclasses.replace(MID, steps_completed=0, in_flight_observed=frozenset())
    assert verdict(state) is HandoffVerdict.NO_TRANSACTION


def test_everything_finished_is_no_transaction() -> None:
    """Edge the seed got wrong: all steps done and nothing in flight is not mid-way."""
    state = dataclasses.replace(MID, steps_completed=3, in_flight_observed=frozenset())
    assert verdict(state) is HandoffVerdict.NO_TRANSACTION


def test_in_flight_with_zero_steps_completed_is_mid_transaction() -> None:
    """Step 1 was sent but not acknowledged: that is mid-way even at 0 completed."""
    state = dataclasses.replace(MID, steps_completed=0, checkpoint_digest=None)
    assert verdict(state) is HandoffVerdict.CHECKPOINT_MISSING


def test_lock_not_held_has_its_own_verdict_and_comes_first() -> None:
    """The seed reused IN_FLIGHT_UNTRACKED for a missing lock; and without the lock even a
    handoff with nothing mid-way must not proceed."""
    assert verdict(dataclasses.replace(MID, lock_held=False)) is HandoffVerdict.LOCK_NOT_HELD
    idle = dataclasses.replace(MID, lock_held=False, in_flight_observed=frozenset())
    assert verdict(dataclasses.replace(idle, steps_completed=0)) is HandoffVerdict.LOCK_NOT_HELD


@pytest.mark.parametrize("missing", [None, ""])
def test_missing_checkpoint(missing: str | None) -> None:
    """An empty signature is no checkpoint either."""
    state = dataclasses.replace(MID, checkpoint_digest=missing)
    assert verdict(state) is HandoffVerdict.CHECKPOINT_MISSING


def test_no_registry_is_untracked() -> None:
    state = dataclasses.replace(MID, in_flight_registry=None)
    assert verdict(state) is HandoffVerdict.IN_FLIGHT_UNTRACKED


def test_operation_missing_from_the_registry_is_untracked() -> None:
    """The seed took any tuple of in-flight ops as tracked; an op observed but not listed
    is exactly what a successor could duplicate."""
    state = dataclasses.replace(MID, in_flight_observed=frozenset({"delivery:1", "delivery:2"}))
    assert verdict(state) is HandoffVerdict.IN_FLIGHT_UNTRACKED


def test_exception_needs_idempotence_and_a_clean_recovery() -> None:
    base = dataclasses.replace(MID, checkpoint_digest=None)
    assert verdict(dataclasses.replace(base, remaining_idempotent=True)) is (
        HandoffVerdict.CHECKPOINT_MISSING
    ), "idempotent but recovery never ran: proves nothing"
    assert verdict(dataclasses.replace(base, recovery=(CLEAN,))) is (
        HandoffVerdict.CHECKPOINT_MISSING
    ), "clean recovery but not idempotent"
    dirty = dataclasses.replace(base, remaining_idempotent=True, recovery=(CLEAN, DIRTY))
    assert verdict(dirty) is HandoffVerdict.CHECKPOINT_MISSING, "a material partial effect"
    ok = dataclasses.replace(base, remaining_idempotent=True, recovery=(CLEAN,))
    decision = evaluate_handoff(ok)
    assert decision.verdict is HandoffVerdict.HANDOFF_SAFE and decision.exception_applied


def test_exception_must_cover_every_observed_operation() -> None:
    state = dataclasses.replace(
        MID,
        checkpoint_digest=None,
        in_flight_observed=frozenset({"delivery:1", "block:9"}),
        remaining_idempotent=True,
        recovery=(CLEAN,),
    )
    assert not exception_holds(state)
    assert verdict(state) is HandoffVerdict.CHECKPOINT_MISSING


def test_exception_also_covers_an_untracked_registry() -> None:
    state = dataclasses.replace(
        MID, in_flight_registry=None, remaining_idempotent=True, recovery=(CLEAN,)
    )
    assert verdict(state) is HandoffVerdict.HANDOFF_SAFE


def test_digest_binds_the_facts() -> None:
    a = evaluate_handoff(MID).digest
    assert a == evaluate_handoff(dataclasses.replace(MID)).digest
    assert a != evaluate_handoff(dataclasses.replace(MID, steps_completed=2)).digest


def test_negative_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        evaluate_handoff(dataclasses.replace(MID, steps_completed=-1))
