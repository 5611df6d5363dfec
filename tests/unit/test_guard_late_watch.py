"""The late-finality window (guard.late_watch.still_watched) over real guard decisions: how
long a settlement stays followed after its verdict, the rule chains, payments and sources
share."""

from __future__ import annotations

from guard.late_watch import still_watched
from guard.settlement import (
    Evidence,
    Observation,
    Settlement,
    SettlementPolicy,
    Transition,
    TransitionKind,
    Verdict,
    evaluate_settlement,
    settle_transition,
)
from guard.types import SettlementId, UnixMillis

T0 = 1_700_000_000_000
TIMEOUT_MS = 60_000
DEADLINE = T0 + TIMEOUT_MS
LATE_WATCH_MS = 30_000
POLICY = SettlementPolicy(max_wait_ms=600_000)
SETTLEMENT = Settlement(SettlementId("s-1"), True, UnixMillis(T0), TIMEOUT_MS)


def final_at(instant: int) -> Observation:
    return Observation(
        finality=Evidence.of("depth", UnixMillis(instant), block_number=812, depth=12)
    )


def failed_at(instant: int) -> Observation:
    return Observation(failure=Evidence.of("reverted", UnixMillis(instant), block_number=812))


def moved(observation: Observation, now: int, after: Transition | None = None) -> Transition:
    fresh = evaluate_settlement(SETTLEMENT, observation, POLICY, UnixMillis(now))
    return settle_transition(None if after is None else after.decision, fresh)


def timed_out() -> Transition:
    transition = moved(Observation(), DEADLINE)
    assert transition.decision.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
    return transition


def test_an_awaiting_settlement_is_watched_whatever_the_clock_says() -> None:
    transition = moved(Observation(), T0 + 1_000)
    assert transition.decision.verdict is Verdict.AWAITING_FINALITY
    assert still_watched(transition, DEADLINE, LATE_WATCH_MS, T0 + 1_000)
    assert still_watched(transition, DEADLINE, 0, DEADLINE + 10 * LATE_WATCH_MS)


def test_confirmed_and_failed_settlements_stop_at_once() -> None:
    confirmed = moved(final_at(T0 + 5_000), T0 + 5_000)
    failed = moved(failed_at(T0 + 5_000), T0 + 5_000)
    assert confirmed.decision.verdict is Verdict.FINALITY_CONFIRMED
    assert failed.decision.verdict is Verdict.SETTLEMENT_FAILED
    for transition in (confirmed, failed):
        assert not still_watched(transition, DEADLINE, LATE_WATCH_MS, T0 + 5_000)


def test_a_timeout_is_watched_until_the_late_window_closes() -> None:
    transition = timed_out()
    assert still_watched(transition, DEADLINE, LATE_WATCH_MS, DEADLINE)
    assert still_watched(transition, DEADLINE, LATE_WATCH_MS, DEADLINE + LATE_WATCH_MS - 1)
    assert not still_watched(transition, DEADLINE, LATE_WATCH_MS, DEADLINE + LATE_WATCH_MS)
    assert not still_watched(transition, DEADLINE, 0, DEADLINE)


def test_a_timeout_whose_late_finality_was_seen_is_no_longer_watched() -> None:
    late = moved(final_at(DEADLINE + 1_000), DEADLINE + 1_000, after=timed_out())
    assert late.kind is TransitionKind.LATE_FINALITY
    assert late.decision.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
    assert not still_watched(late, DEADLINE, LATE_WATCH_MS, DEADLINE + 1_000)
