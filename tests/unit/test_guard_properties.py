"""Property tests of the settlement guard and canonical JSON (hypothesis)."""

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.canonical import canonical_json, digest
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

PROPERTY = settings(max_examples=200, deadline=None, database=None)

# Instants from the epoch itself (0 is a valid instant) to 2001; waits of 1 ms to ~11 days.
instants = st.integers(min_value=0, max_value=10**12).map(UnixMillis)
durations = st.integers(min_value=1, max_value=10**9)

# Fact sets are drawn from a fixed menu: varied enough to tell evidence apart, cheap to draw.
FACT_MENU: list[tuple[tuple[str, object], ...]] = [
    (),
    (("depth", 1),),
    (("depth", 12),),
    (("block_hash", "0x" + "aa" * 32), ("block_number", 812), ("depth", 12)),
    (("block_hash", "0x" + "bb" * 32), ("block_number", 812), ("depth", 12)),
    (("block_number", 0), ("finalized", True)),
    (("event_id", "evt_1"), ("status", None)),
    (("status", 0),),
    (("status", False),),
]
evidence = st.builds(
    Evidence,
    kind=st.sampled_from(["depth", "finalized", "included", "reverted", "replaced", "dropped"]),
    observed_at=instants,
    facts=st.sampled_from(FACT_MENU),
)
maybe_evidence = st.none() | evidence
# Decisive evidence is absent more often than not, so the clock gets its say too.
rare_evidence = st.sampled_from([False, False, True]).flatmap(
    lambda present: evidence if present else st.none()
)
observations = st.builds(
    Observation, finality=rare_evidence, failure=rare_evidence, progress=maybe_evidence
)
settlements = st.builds(
    Settlement,
    settlement_id=st.sampled_from(["s-1", "s-2", "0"]).map(SettlementId),
    initiated=st.sampled_from([True, True, True, False]),
    initiated_at=instants,
    timeout_ms=durations,
)
initiated_settlements = settlements.map(
    lambda s: Settlement(s.settlement_id, True, s.initiated_at, s.timeout_ms)
)
policies = st.builds(SettlementPolicy, max_wait_ms=durations)


@st.composite
def cases(
    draw: st.DrawFn, settlement_strategy: st.SearchStrategy[Settlement] = settlements
) -> tuple[Settlement, Observation, SettlementPolicy, UnixMillis]:
    """A settlement, an observation, a policy and an instant near the deadline or anywhere."""
    s = draw(settlement_strategy)
    policy = draw(policies)
    wait = min(s.timeout_ms, policy.max_wait_ms)
    near = st.integers(min_value=-3, max_value=3).map(lambda d: s.initiated_at + wait + d)
    now = draw(st.one_of(near, instants, st.integers(s.initiated_at, s.initiated_at + 2 * wait)))
    return s, draw(observations), policy, UnixMillis(max(0, now))


# --- the decision boundary ----------------------------------------------------------------


@PROPERTY
@given(cases())
def test_never_confirmed_without_finality_evidence(
    case: tuple[Settlement, Observation, SettlementPolicy, UnixMillis],
) -> None:
    s, observation, policy, now = case
    decision = evaluate_settlement(s, observation, policy, now)
    if observation.finality is None:
        assert decision.verdict is not Verdict.FINALITY_CONFIRMED
    if decision.verdict is Verdict.FINALITY_CONFIRMED:
        assert decision.evidence is not None
        assert decision.evidence == observation.finality


@PROPERTY
@given(cases(initiated_settlements), evidence)
def test_failure_evidence_always_fails(
    case: tuple[Settlement, Observation, SettlementPolicy, UnixMillis], failure: Evidence
) -> None:
    s, observation, policy, now = case
    observation = Observation(
        finality=observation.finality, failure=failure, progress=observation.progress
    )
    decision = evaluate_settlement(s, observation, policy, now)
    assert decision.verdict is Verdict.SETTLEMENT_FAILED
    assert decision.evidence == failure
    assert decision.remaining_ms == 0


@PROPERTY
@given(cases())
def test_awaiting_has_time_left(
    case: tuple[Settlement, Observation, SettlementPolicy, UnixMillis],
) -> None:
    s, observation, policy, now = case
    decision = evaluate_settlement(s, observation, policy, now)
    if decision.verdict is Verdict.AWAITING_FINALITY:
        assert decision.deadline is not None
        assert now < decision.deadline
        assert decision.remaining_ms > 0
        assert decision.remaining_ms == decision.deadline - now
        assert observation.finality is None
        assert observation.failure is None
    else:
        assert decision.remaining_ms == 0


@PROPERTY
@given(cases())
def test_timeout_only_without_finality_and_past_the_deadline(
    case: tuple[Settlement, Observation, SettlementPolicy, UnixMillis],
) -> None:
    s, observation, policy, now = case
    decision = evaluate_settlement(s, observation, policy, now)
    if not s.initiated:
        assert decision.verdict is Verdict.NO_SETTLEMENT
        assert decision.deadline is None
    else:
        assert decision.deadline == s.initiated_at + min(s.timeout_ms, policy.max_wait_ms)
        assert decision.elapsed_ms == max(0, now - s.initiated_at)
    timed_out = decision.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
    if timed_out:
        assert observation.finality is None
        assert observation.failure is None
        assert decision.deadline is not None
        assert now >= decision.deadline
    if s.initiated and observation.finality is None and observation.failure is None:
        # ... and always then: the boundary is inclusive and exact.
        assert timed_out == (now >= deadline_of(s, policy))


@PROPERTY
@given(cases())
def test_evaluate_is_deterministic(
    case: tuple[Settlement, Observation, SettlementPolicy, UnixMillis],
) -> None:
    s, observation, policy, now = case
    first = evaluate_settlement(s, observation, policy, now)
    second = evaluate_settlement(s, observation, policy, now)
    assert first == second
    assert first.digest == second.digest
    assert first.digest.startswith("sha256:")


@PROPERTY
@given(cases(initiated_settlements), evidence, evidence)
def test_same_verdict_different_evidence_different_digest(
    case: tuple[Settlement, Observation, SettlementPolicy, UnixMillis],
    one: Evidence,
    other: Evidence,
) -> None:
    s, _, policy, now = case
    a = evaluate_settlement(s, Observation(finality=one), policy, now)
    b = evaluate_settlement(s, Observation(finality=other), policy, now)
    assert a.verdict is b.verdict is Verdict.FINALITY_CONFIRMED
    assert (a.digest == b.digest) == (one.as_json() == other.as_json())


# --- transitions --------------------------------------------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> list[Decision]:
    """Fresh decisions for one settlement, evaluated at random instants."""
    s = draw(initiated_settlements)
    policy = draw(policies)
    wait = min(s.timeout_ms, policy.max_wait_ms)
    nows = st.integers(s.initiated_at, s.initiated_at + 2 * wait).map(UnixMillis)
    steps = draw(st.lists(st.tuples(observations, nows), min_size=1, max_size=8))
    return [evaluate_settlement(s, obs, policy, now) for obs, now in steps]


@PROPERTY
@given(histories())
def test_terminal_verdict_never_changes_without_a_reversal(history: list[Decision]) -> None:
    stored: Decision | None = None
    settled: Decision | None = None
    for fresh in history:
        transition = settle_transition(stored, fresh)
        assert not transition.finality_violation
        assert transition.kind is not TransitionKind.REVERSED
        if settled is not None:
            assert transition.decision == settled
            assert transition.kind in {
                TransitionKind.UNCHANGED,
                TransitionKind.HELD,
                TransitionKind.LATE_FINALITY,
            }
            if transition.kind is TransitionKind.LATE_FINALITY:
                assert settled.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
                assert fresh.verdict is Verdict.FINALITY_CONFIRMED
        else:
            assert transition.decision == fresh
        stored = transition.decision
        if settled is None and stored.verdict.terminal:
            settled = stored


@st.composite
def decision_pairs(draw: st.DrawFn) -> tuple[Decision, Decision]:
    """A stored and a fresh decision for one settlement."""
    s = draw(initiated_settlements)
    policy = draw(policies)
    wait = min(s.timeout_ms, policy.max_wait_ms)
    nows = st.integers(s.initiated_at, s.initiated_at + 2 * wait).map(UnixMillis)
    stored, fresh = (evaluate_settlement(s, draw(observations), policy, draw(nows)) for _ in "ab")
    return stored, fresh


@PROPERTY
@given(decision_pairs(), evidence)
def test_a_reversal_is_the_only_way_out_of_a_terminal_verdict(
    pair: tuple[Decision, Decision], facts: Evidence
) -> None:
    previous, fresh = pair
    transition = settle_transition(previous, fresh, Reversal(reason="reorg", evidence=facts))
    if previous.verdict.terminal:
        assert transition.kind is TransitionKind.REVERSED
        assert transition.decision == fresh
        assert transition.finality_violation == (previous.verdict is Verdict.FINALITY_CONFIRMED)
    else:
        assert transition.kind is not TransitionKind.REVERSED
        assert transition.decision == fresh
        assert not transition.finality_violation


# --- canonical JSON -----------------------------------------------------------------------

keys = st.text(max_size=4)
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=15,
)
json_scalars = st.none() | st.booleans() | st.integers() | keys


def reorder(value: Any, rnd: random.Random) -> Any:
    """The same JSON value with every object's keys inserted in a shuffled order."""
    if isinstance(value, dict):
        keys = list(value)
        rnd.shuffle(keys)
        return {key: reorder(value[key], rnd) for key in keys}
    if isinstance(value, list):
        return [reorder(item, rnd) for item in value]
    return value


@PROPERTY
@given(json_values, st.randoms(use_true_random=False))
def test_canonical_json_is_stable_under_key_order(value: Any, rnd: random.Random) -> None:
    shuffled = reorder(value, rnd)
    assert shuffled == value
    assert canonical_json(shuffled) == canonical_json(value)
    assert digest(shuffled) == digest(value)


@PROPERTY
@given(json_values)
def test_canonical_json_round_trips_and_is_compact(value: Any) -> None:
    encoded = canonical_json(value)
    assert json.loads(encoded.decode("utf-8")) == value
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert encoded == expected.encode("utf-8")
    assert canonical_json(json.loads(encoded)) == encoded


def _with_float(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    in_list = st.builds(
        lambda before, x, after: [*before, x, *after],
        st.lists(json_scalars, max_size=2),
        inner,
        st.lists(json_scalars, max_size=2),
    )
    in_tuple = in_list.map(tuple)
    in_dict = st.builds(
        lambda others, key, x: {**others, key: x},
        st.dictionaries(keys, json_scalars, max_size=3),
        keys,
        inner,
    )
    return in_list | in_tuple | in_dict


# Every value drawn here holds at least one float, somewhere.
values_with_a_float: st.SearchStrategy[Any] = st.recursive(
    st.floats(allow_nan=True, allow_infinity=True), _with_float, max_leaves=6
)


@PROPERTY
@given(values_with_a_float)
def test_canonical_json_rejects_floats_anywhere(value: Any) -> None:
    with pytest.raises(TypeError, match="float"):
        canonical_json(value)
    with pytest.raises(TypeError):
        digest(value)


@PROPERTY
@given(st.integers(min_value=-(2**53), max_value=2**53).map(float))
def test_canonical_json_rejects_integral_floats(value: float) -> None:
    # 1.0 is still a float: it has more than one spelling, so it is refused, not coerced.
    with pytest.raises(TypeError):
        canonical_json({"amount": value})
