"""Property tests of the settlement guard and canonical JSON (hypothesis).

The rules under test (see the docstrings of ``guard/settlement.py`` and ``guard/canonical.py``):

* failure evidence dominates everything;
* finality confirms when evaluated before the deadline (``now < deadline``) *or* when it was
  observed before the deadline (``finality.observed_at < deadline``);
* otherwise, at ``now >= deadline`` the verdict is ``TIMEOUT_TREATED_AS_FAILURE``, and finality
  observed at or after the deadline rides along as ``late_finality`` (bound into the digest);
* a terminal verdict changes only through ``REVERSED``, and only from ``FINALITY_CONFIRMED``;
  a failure or a timeout is never turned into a commit;
* canonical JSON refuses floats, integers beyond ``2**53 - 1`` and lone surrogates with
  :class:`~guard.canonical.CanonicalError`.
"""

import dataclasses
import json
import random
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from guard.canonical import MAX_SAFE_INTEGER, CanonicalError, canonical_json, digest
from guard.errors import GuardError
from guard.settlement import (
    Decision,
    Evidence,
    Observation,
    Reversal,
    Settlement,
    SettlementPolicy,
    Transition,
    TransitionKind,
    Verdict,
    deadline_of,
    decision_as_json,
    decision_from_json,
    evaluate_settlement,
    settle_transition,
)
from guard.types import SettlementId, UnixMillis

# 100 examples for most properties; the rules of the decision boundary itself get 200. Time
# goes into hypothesis' own drawing, so strategies are built once and draw few choices.
PROPERTY = settings(max_examples=100, deadline=None, database=None)
BOUNDARY = settings(max_examples=200, deadline=None, database=None)

Case = tuple[Settlement, Observation, SettlementPolicy, UnixMillis]

# Instants from the epoch itself (0 is a valid instant) to 2001; waits of 1 ms to ~11 days.
instants = st.integers(min_value=0, max_value=10**12).map(UnixMillis)
durations = st.integers(min_value=1, max_value=10**9)

# Fact sets are drawn from a fixed menu: varied enough to tell evidence apart, cheap to draw.
# ``status`` 0 and False compare equal in Python but are different JSON: the digest tells them
# apart, so digests are compared with canonical bytes, never with ``==`` on the facts.
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
KINDS = ["depth", "finalized", "included", "reverted", "replaced", "dropped"]


def present(chance: int, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``strategy`` about one time in ``chance``, else None: the clock gets its say too."""
    return st.sampled_from([True] + [False] * (chance - 1)).flatmap(
        lambda here: strategy if here else st.none()
    )


evidence = st.builds(
    Evidence,
    kind=st.sampled_from(KINDS),
    observed_at=instants,
    facts=st.sampled_from(FACT_MENU),
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

# Instants that matter are relative to a settlement's deadline, which is only known once the
# settlement and policy are drawn. Strategies are built once (building them per draw is what
# made these tests slow), so they draw a *relative* instant, resolved against the settlement.


@dataclasses.dataclass(frozen=True)
class When:
    """An instant relative to a settlement: near its deadline, within two waits, or absolute."""

    anchor: str
    offset: int

    def at(self, s: Settlement, policy: SettlementPolicy) -> UnixMillis:
        wait = min(s.timeout_ms, policy.max_wait_ms)
        if self.anchor == "deadline":  # 3 ms before the deadline to 3 ms after it
            instant = s.initiated_at + wait + self.offset % 7 - 3
        elif self.anchor == "span":  # from initiation to two waits after it
            instant = s.initiated_at + self.offset % (2 * wait + 1)
        else:  # anywhere from the epoch on
            instant = self.offset
        return UnixMillis(max(0, instant))


# Used both for ``now`` and for when evidence was observed, so that "observed just before / at
# / just after the deadline" and "evaluated just before / at / after it" all come up often.
whens = st.builds(
    When, st.sampled_from(["deadline", "deadline", "span", "span", "epoch"]), instants
)
EvidenceSpec = tuple[str, When, tuple[tuple[str, object], ...]]
evidence_specs = st.tuples(st.sampled_from(KINDS), whens, st.sampled_from(FACT_MENU))
ObservationSpec = tuple[EvidenceSpec | None, EvidenceSpec | None, EvidenceSpec | None]
# Failure dominates everything, so it is the rarest; finality is there about half the time.
observation_specs = st.tuples(
    present(2, evidence_specs), present(5, evidence_specs), present(2, evidence_specs)
)


def evidence_of(spec: EvidenceSpec, s: Settlement, policy: SettlementPolicy) -> Evidence:
    kind, when, facts = spec
    return Evidence(kind=kind, observed_at=when.at(s, policy), facts=facts)


def observation_of(spec: ObservationSpec, s: Settlement, policy: SettlementPolicy) -> Observation:
    finality, failure, progress = (
        None if part is None else evidence_of(part, s, policy) for part in spec
    )
    return Observation(finality=finality, failure=failure, progress=progress)


@st.composite
def cases(
    draw: st.DrawFn, settlement_strategy: st.SearchStrategy[Settlement] = settlements
) -> Case:
    """A settlement, an observation, a policy and an instant, all clustered around the deadline."""
    s = draw(settlement_strategy)
    policy = draw(policies)
    return s, observation_of(draw(observation_specs), s, policy), policy, draw(whens).at(s, policy)


def finality_in_time(observation: Observation, deadline: int, now: int) -> bool:
    """The documented confirmation rule (failure aside)."""
    finality = observation.finality
    return finality is not None and (now < deadline or finality.observed_at < deadline)


def same_json(one: Evidence | None, other: Evidence | None) -> bool:
    """Equal as canonical JSON (``==`` would confuse ``0`` with ``False``)."""
    return canonical_json(None if one is None else one.as_json()) == canonical_json(
        None if other is None else other.as_json()
    )


# --- the decision boundary ----------------------------------------------------------------


@BOUNDARY
@given(cases())
def test_verdict_follows_the_documented_rules(case: Case) -> None:
    s, observation, policy, now = case
    decision = evaluate_settlement(s, observation, policy, now)
    if not s.initiated:
        assert decision.verdict is Verdict.NO_SETTLEMENT
        assert decision.deadline is None
        assert (decision.elapsed_ms, decision.remaining_ms) == (0, 0)
        assert decision.evidence is None
        assert decision.late_finality is None
        return
    deadline = s.initiated_at + min(s.timeout_ms, policy.max_wait_ms)
    assert decision.deadline == deadline == deadline_of(s, policy)
    assert decision.elapsed_ms == max(0, now - s.initiated_at)
    expected: tuple[Verdict, Evidence | None, Evidence | None]
    if observation.failure is not None:
        expected = (Verdict.SETTLEMENT_FAILED, observation.failure, None)
    elif finality_in_time(observation, deadline, now):
        expected = (Verdict.FINALITY_CONFIRMED, observation.finality, None)
    elif now >= deadline:
        expected = (Verdict.TIMEOUT_TREATED_AS_FAILURE, observation.progress, observation.finality)
    else:
        expected = (Verdict.AWAITING_FINALITY, observation.progress, None)
    assert (decision.verdict, decision.evidence, decision.late_finality) == expected
    assert decision.remaining_ms == (deadline - now if not decision.verdict.terminal else 0)


@PROPERTY
@given(cases())
def test_never_confirmed_without_finality_evidence_in_time(case: Case) -> None:
    s, observation, policy, now = case
    decision = evaluate_settlement(s, observation, policy, now)
    if observation.finality is None:
        assert decision.verdict is not Verdict.FINALITY_CONFIRMED
    if decision.verdict is Verdict.FINALITY_CONFIRMED:
        assert observation.failure is None
        assert observation.finality is not None
        assert decision.evidence == observation.finality
        assert decision.deadline is not None
        assert now < decision.deadline or observation.finality.observed_at < decision.deadline
        assert decision.late_finality is None


@BOUNDARY
@given(cases(initiated_settlements), evidence_specs)
def test_finality_confirms_when_evaluated_or_observed_before_the_deadline(
    case: Case, spec: EvidenceSpec
) -> None:
    s, observation, policy, now = case
    deadline = deadline_of(s, policy)
    finality = evidence_of(spec, s, policy)
    observation = Observation(finality=finality, progress=observation.progress)
    decision = evaluate_settlement(s, observation, policy, now)
    confirmed = decision.verdict is Verdict.FINALITY_CONFIRMED
    assert confirmed == (now < deadline or finality.observed_at < deadline)
    if not confirmed:
        # Evaluated at/after the deadline, observed at/after it: a timeout with late finality.
        assert decision.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
        assert decision.late_finality == finality
        assert decision.late_finality.observed_at >= deadline


@PROPERTY
@given(cases(initiated_settlements), evidence)
def test_failure_evidence_always_fails(case: Case, failure: Evidence) -> None:
    s, observation, policy, now = case
    observation = Observation(
        finality=observation.finality, failure=failure, progress=observation.progress
    )
    decision = evaluate_settlement(s, observation, policy, now)
    assert decision.verdict is Verdict.SETTLEMENT_FAILED
    assert decision.evidence == failure
    assert decision.remaining_ms == 0
    assert decision.late_finality is None


@PROPERTY
@given(cases())
def test_awaiting_has_time_left(case: Case) -> None:
    s, observation, policy, now = case
    decision = evaluate_settlement(s, observation, policy, now)
    if decision.verdict is Verdict.AWAITING_FINALITY:
        assert decision.deadline is not None
        assert now < decision.deadline
        assert decision.remaining_ms > 0
        assert decision.remaining_ms == decision.deadline - now
        assert observation.finality is None
        assert observation.failure is None
        assert decision.late_finality is None
    else:
        assert decision.remaining_ms == 0


@BOUNDARY
@given(cases())
def test_timeout_only_past_the_deadline_without_finality_observed_before_it(case: Case) -> None:
    s, observation, policy, now = case
    decision = evaluate_settlement(s, observation, policy, now)
    timed_out = decision.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
    if timed_out:
        assert observation.failure is None
        assert decision.deadline is not None
        assert now >= decision.deadline
        assert decision.evidence == observation.progress
        finality = observation.finality
        assert finality is None or finality.observed_at >= decision.deadline
    if s.initiated and observation.failure is None:
        # ... and always then: both boundaries are inclusive and exact.
        deadline = deadline_of(s, policy)
        finality = observation.finality
        before = finality is not None and finality.observed_at < deadline
        assert timed_out == (now >= deadline and not before)


@BOUNDARY
@given(cases())
def test_late_finality_is_present_exactly_on_a_timeout_with_finality_evidence(case: Case) -> None:
    s, observation, policy, now = case
    decision = evaluate_settlement(s, observation, policy, now)
    timed_out = decision.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
    assert (decision.late_finality is not None) == (timed_out and observation.finality is not None)
    without = evaluate_settlement(s, dataclasses.replace(observation, finality=None), policy, now)
    if decision.late_finality is not None:
        assert decision.late_finality == observation.finality
        assert decision.deadline is not None
        assert decision.late_finality.observed_at >= decision.deadline
        assert now >= decision.deadline
        assert "reconcile" in decision.directive
        # The same timeout without the late finality: same verdict, but a different digest.
        assert without.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
        assert without.late_finality is None
        assert without.digest != decision.digest
    elif decision.verdict is not Verdict.FINALITY_CONFIRMED:
        # Finality that did not decide (ignored, or no settlement) is not bound anywhere.
        assert without == decision


@PROPERTY
@given(cases())
def test_evaluate_is_deterministic(case: Case) -> None:
    s, observation, policy, now = case
    first = evaluate_settlement(s, observation, policy, now)
    second = evaluate_settlement(s, observation, policy, now)
    assert first == second
    assert first.digest == second.digest
    assert first.digest.startswith("sha256:")


@PROPERTY
@given(cases())
def test_decision_json_round_trips_with_late_finality(case: Case) -> None:
    decision = evaluate_settlement(*case)
    as_json = decision_as_json(decision)
    assert as_json["late_finality"] == (
        None if decision.late_finality is None else decision.late_finality.as_json()
    )
    stored = json.loads(canonical_json(as_json))
    restored = decision_from_json(stored)
    assert restored == decision
    assert same_json(restored.late_finality, decision.late_finality)
    assert same_json(restored.evidence, decision.evidence)
    assert decision_as_json(restored) == as_json


@st.composite
def evidence_pairs(draw: st.DrawFn) -> tuple[Case, Evidence, Evidence]:
    """Two pieces of finality evidence for one case: often equal or differing in one field."""
    case = draw(cases(initiated_settlements))
    s, _, policy, _ = case
    one = evidence_of(draw(evidence_specs), s, policy)
    change = draw(st.sampled_from(["nothing", "observed_at", "kind", "facts", "everything"]))
    if change == "nothing":
        other = one
    elif change == "observed_at":
        other = dataclasses.replace(one, observed_at=draw(whens).at(s, policy))
    elif change == "kind":
        other = dataclasses.replace(one, kind=draw(st.sampled_from(KINDS)))
    elif change == "facts":
        other = dataclasses.replace(one, facts=draw(st.sampled_from(FACT_MENU)))
    else:
        other = evidence_of(draw(evidence_specs), s, policy)
    return case, one, other


@PROPERTY
@given(evidence_pairs())
def test_the_digest_binds_the_finality_evidence_whatever_the_verdict(
    pair: tuple[Case, Evidence, Evidence],
) -> None:
    (s, _, policy, now), one, other = pair
    a = evaluate_settlement(s, Observation(finality=one), policy, now)
    b = evaluate_settlement(s, Observation(finality=other), policy, now)
    # Finality alone confirms, or is carried as late finality on a timeout: bound either way.
    for decision, finality in ((a, one), (b, other)):
        assert decision.verdict in {Verdict.FINALITY_CONFIRMED, Verdict.TIMEOUT_TREATED_AS_FAILURE}
        confirmed = decision.verdict is Verdict.FINALITY_CONFIRMED
        assert (decision.evidence if confirmed else decision.late_finality) == finality
    assert (a.digest == b.digest) == same_json(one, other)


# --- transitions --------------------------------------------------------------------------

reversals = st.builds(Reversal, reason=st.sampled_from(["reorg", "refund"]), evidence=evidence)
history_steps = st.tuples(observation_specs, whens, st.none() | reversals)


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[Decision, Reversal | None]]:
    """Fresh decisions for one settlement at instants around its deadline, maybe reversed."""
    s = draw(initiated_settlements)
    policy = draw(policies)
    steps = draw(st.lists(history_steps, min_size=1, max_size=6))
    return [
        (evaluate_settlement(s, observation_of(obs, s, policy), policy, now.at(s, policy)), rev)
        for obs, now, rev in steps
    ]


def expected_kind(previous: Decision | None, fresh: Decision) -> TransitionKind:
    """The transition kind without a reversal, as documented."""
    if previous is None or not previous.verdict.terminal:
        if fresh.late_finality is not None:
            return TransitionKind.LATE_FINALITY
        if previous is not None and previous.verdict is fresh.verdict:
            return TransitionKind.UNCHANGED
        return TransitionKind.ADVANCED
    if previous.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE and (
        fresh.verdict is Verdict.FINALITY_CONFIRMED or fresh.late_finality is not None
    ):
        return TransitionKind.LATE_FINALITY
    if previous.verdict is fresh.verdict:
        return TransitionKind.UNCHANGED
    return TransitionKind.HELD


@PROPERTY
@given(histories())
def test_terminal_verdict_never_changes_without_a_reversal(
    history: list[tuple[Decision, Reversal | None]],
) -> None:
    stored: Decision | None = None
    settled: Decision | None = None
    for fresh, _ in history:
        transition = settle_transition(stored, fresh)
        assert not transition.finality_violation
        assert transition.kind is not TransitionKind.REVERSED
        assert transition.kind is expected_kind(stored, fresh)
        if settled is not None:
            # The very decision that first became terminal, digest and all.
            assert transition.decision == settled
            assert transition.kind in {
                TransitionKind.UNCHANGED,
                TransitionKind.HELD,
                TransitionKind.LATE_FINALITY,
            }
            if transition.kind is TransitionKind.LATE_FINALITY:
                assert settled.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
                assert (
                    fresh.verdict is Verdict.FINALITY_CONFIRMED or fresh.late_finality is not None
                )
        else:
            assert transition.decision == fresh
            if transition.kind is TransitionKind.LATE_FINALITY:
                assert fresh.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
                assert fresh.late_finality is not None
        stored = transition.decision
        if settled is None and stored.verdict.terminal:
            settled = stored


@PROPERTY
@given(histories())
def test_a_terminal_verdict_changes_only_via_reversed_from_finality_confirmed(
    history: list[tuple[Decision, Reversal | None]],
) -> None:
    stored: Decision | None = None
    for fresh, reversal in history:
        transition = settle_transition(stored, fresh, reversal)
        reversed_ = (
            stored is not None
            and stored.verdict is Verdict.FINALITY_CONFIRMED
            and reversal is not None
        )
        assert (transition.kind is TransitionKind.REVERSED) == reversed_
        assert transition.finality_violation == reversed_
        if reversed_:
            assert transition.decision == fresh
        else:
            # Exactly as if there were no reversal at all.
            assert transition == settle_transition(stored, fresh)
            if stored is not None and stored.verdict.terminal:
                assert transition.decision == stored
        if stored is not None and stored.verdict in {
            Verdict.SETTLEMENT_FAILED,
            Verdict.TIMEOUT_TREATED_AS_FAILURE,
        }:
            assert transition.decision.verdict is stored.verdict
        stored = transition.decision


@st.composite
def decision_pairs(draw: st.DrawFn) -> tuple[Decision, Decision]:
    """A stored and a fresh decision for one settlement."""
    s = draw(initiated_settlements)
    policy = draw(policies)
    stored, fresh = (
        evaluate_settlement(
            s, observation_of(draw(observation_specs), s, policy), policy, draw(whens).at(s, policy)
        )
        for _ in "ab"
    )
    return stored, fresh


@PROPERTY
@given(decision_pairs(), reversals)
def test_a_reversal_acts_only_on_finality_confirmed(
    pair: tuple[Decision, Decision], reversal: Reversal
) -> None:
    previous, fresh = pair
    transition = settle_transition(previous, fresh, reversal)
    if previous.verdict is Verdict.FINALITY_CONFIRMED:
        assert transition == Transition(TransitionKind.REVERSED, fresh, True)
    else:
        assert transition == settle_transition(previous, fresh)
        assert transition.kind is not TransitionKind.REVERSED
        assert not transition.finality_violation
        assert transition.decision == (previous if previous.verdict.terminal else fresh)


@st.composite
def failed_or_timed_out_then_confirmed(draw: st.DrawFn) -> tuple[Decision, Decision]:
    """A stored failure or timeout, and a fresh FINALITY_CONFIRMED for the same settlement."""
    s = draw(initiated_settlements)
    policy = draw(policies)
    deadline = deadline_of(s, policy)
    if draw(st.booleans()):
        failure = evidence_of(draw(evidence_specs), s, policy)
        previous = evaluate_settlement(
            s, Observation(failure=failure), policy, draw(whens).at(s, policy)
        )
    else:
        # At or after the deadline, with no finality or finality observed at/after it.
        late = draw(present(2, evidence))
        if late is not None:
            late = dataclasses.replace(late, observed_at=UnixMillis(deadline + late.observed_at))
        now = UnixMillis(deadline + draw(st.integers(min_value=0, max_value=10**9)))
        progress = draw(present(2, evidence))
        previous = evaluate_settlement(
            s, Observation(finality=late, progress=progress), policy, now
        )
    # Finality observed before the deadline, evaluated whenever: confirms.
    before = draw(st.integers(min_value=1, max_value=10**12))
    finality = dataclasses.replace(
        draw(evidence), observed_at=UnixMillis(max(0, deadline - before))
    )
    fresh = evaluate_settlement(
        s, Observation(finality=finality), policy, draw(whens).at(s, policy)
    )
    return previous, fresh


@PROPERTY
@given(failed_or_timed_out_then_confirmed(), st.none() | reversals)
def test_a_failure_or_timeout_never_becomes_finality_confirmed(
    pair: tuple[Decision, Decision], reversal: Reversal | None
) -> None:
    previous, fresh = pair
    assert previous.verdict in {Verdict.SETTLEMENT_FAILED, Verdict.TIMEOUT_TREATED_AS_FAILURE}
    assert fresh.verdict is Verdict.FINALITY_CONFIRMED
    transition = settle_transition(previous, fresh, reversal)
    assert transition.decision == previous
    assert transition.decision.verdict is not Verdict.FINALITY_CONFIRMED
    assert not transition.finality_violation
    if previous.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE:
        assert transition.kind is TransitionKind.LATE_FINALITY
    else:
        assert transition.kind is TransitionKind.HELD


# --- canonical JSON -----------------------------------------------------------------------

safe_integers = st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
unsafe_integers = st.integers(min_value=MAX_SAFE_INTEGER + 1) | st.integers(
    max_value=-MAX_SAFE_INTEGER - 1
)
keys = st.text(max_size=4)
json_scalars = st.none() | st.booleans() | safe_integers | st.text(max_size=8)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=12,
)


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


def jcs_key_order(value: Any) -> Any:
    """``value`` with every object's keys in RFC 8785's order: by UTF-16 code units, which is
    not Python's code point order once a key holds a character beyond U+FFFF."""
    if isinstance(value, dict):
        ordered = sorted(value, key=lambda key: key.encode("utf-16-be"))
        return {key: jcs_key_order(value[key]) for key in ordered}
    if isinstance(value, list):
        return [jcs_key_order(item) for item in value]
    return value


@PROPERTY
@given(json_values)
@example({"\U00010000": None, "\uffff": None})  # U+10000 is D800 DC00 in UTF-16: before U+FFFF
def test_canonical_json_round_trips_and_is_compact(value: Any) -> None:
    encoded = canonical_json(value)
    assert json.loads(encoded.decode("utf-8")) == value
    expected = json.dumps(jcs_key_order(value), separators=(",", ":"), ensure_ascii=False)
    assert encoded == expected.encode("utf-8")
    assert canonical_json(json.loads(encoded)) == encoded


def containing(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Values that hold at least one value of ``inner`` somewhere, in lists, tuples or objects.

    The other members are valid JSON scalars, so the only fault is the one planted.
    """

    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        in_list = st.builds(
            lambda before, x, after: [*before, x, *after],
            st.lists(json_scalars, max_size=2),
            children,
            st.lists(json_scalars, max_size=2),
        )
        in_dict = st.builds(
            lambda others, key, x: {**others, key: x},
            st.dictionaries(keys, json_scalars, max_size=3),
            keys,
            children,
        )
        return in_list | in_list.map(tuple) | in_dict

    return st.recursive(inner, extend, max_leaves=6)


@PROPERTY
@given(containing(st.floats(allow_nan=True, allow_infinity=True)))
def test_canonical_json_rejects_floats_anywhere(value: Any) -> None:
    with pytest.raises(CanonicalError, match="float"):
        canonical_json(value)
    with pytest.raises(CanonicalError):
        digest(value)


@PROPERTY
@given(st.integers(min_value=-(2**53), max_value=2**53).map(float))
def test_canonical_json_rejects_integral_floats(value: float) -> None:
    # 1.0 is still a float: it has more than one spelling, so it is refused, not coerced.
    with pytest.raises(CanonicalError, match="float"):
        canonical_json({"amount": value})


@PROPERTY
@given(containing(unsafe_integers))
def test_canonical_json_rejects_unsafe_integers_anywhere(value: Any) -> None:
    with pytest.raises(CanonicalError, match=r"2\*\*53 - 1"):
        canonical_json(value)
    with pytest.raises(CanonicalError):
        digest(value)


@PROPERTY
@given(safe_integers)
def test_canonical_json_writes_safe_integers_as_plain_digits(value: int) -> None:
    assert canonical_json(value) == str(value).encode("ascii")
    assert canonical_json({"n": value}) == b'{"n":' + str(value).encode("ascii") + b"}"


@PROPERTY
@given(
    st.text(max_size=4),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    st.text(max_size=4),
    st.sampled_from(["value", "key", "nested"]),
)
def test_canonical_json_rejects_a_lone_surrogate_anywhere(
    before: str, surrogate: str, after: str, where: str
) -> None:
    text = before + surrogate + after
    value: Any = {
        "value": text,
        "key": {text: 1},
        "nested": {"a": [1, {"b": text}]},
    }[where]
    with pytest.raises(CanonicalError, match="surrogate"):
        canonical_json(value)
    with pytest.raises(CanonicalError):
        digest(value)


def test_canonical_error_is_a_guard_error_and_a_type_error() -> None:
    assert issubclass(CanonicalError, GuardError)
    assert issubclass(CanonicalError, TypeError)


@pytest.mark.parametrize("value", [2**53, -(2**53), 2**53 + 1, 2**64, -(2**256)])
def test_canonical_json_rejects_2_53_and_beyond(value: int) -> None:
    with pytest.raises(CanonicalError, match=r"\$\.amount: integer .* beyond 2\*\*53 - 1"):
        canonical_json({"amount": value})
    # Still a TypeError for callers that caught the old error.
    with pytest.raises(TypeError):
        digest([value])
    # The documented way out: a decimal string.
    assert canonical_json({"amount": str(value)}) == b'{"amount":"' + str(value).encode() + b'"}'


@pytest.mark.parametrize("value", [2**53 - 1, -(2**53 - 1), 0, -1])
def test_canonical_json_accepts_safe_integers_up_to_the_boundary(value: int) -> None:
    assert canonical_json(value) == str(value).encode("ascii")


def test_canonical_json_booleans_are_not_integers() -> None:
    assert canonical_json([True, False, 1, 0]) == b"[true,false,1,0]"


@pytest.mark.parametrize(
    "value",
    ["\ud800", "a\udfffb", {"\udc00": 1}, ["ok", {"k": "x\ud83d"}]],
    ids=["high", "low-in-text", "in-key", "nested"],
)
def test_canonical_json_rejects_lone_surrogates(value: Any) -> None:
    with pytest.raises(CanonicalError, match="surrogate"):
        canonical_json(value)


def test_canonical_json_accepts_characters_beyond_the_bmp() -> None:
    # A proper pair (one code point in Python) is fine: written as its 4 UTF-8 bytes.
    assert canonical_json("\U0001f600") == '"\U0001f600"'.encode()


@pytest.mark.parametrize("value", [{1: "a"}, {1, 2}, object(), 1.5, float("nan")])
def test_canonical_json_refuses_other_values_with_canonical_error(value: Any) -> None:
    with pytest.raises(CanonicalError):
        canonical_json(value)
