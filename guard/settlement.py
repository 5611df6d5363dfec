"""The settlement guard: when may dependent state be committed?

A settlement is *initiated* (a tx broadcast, a payment confirmed, a job enqueued) long before
it is *final*. Committing on "accepted" is the premature commit. The guard is the decision
boundary between the two: given what has been observed about one settlement and the instant
of evaluation, it answers one of five verdicts:

``NO_SETTLEMENT``
    nothing was initiated; no dependent state is bound.
``SETTLEMENT_FAILED``
    failure evidence exists (a reverted receipt, a replacing tx, a failed charge). Failure
    dominates every other evidence.
``FINALITY_CONFIRMED``
    finality evidence (depth >= N, or the chain's finalized tag covers the block), evaluated
    before the deadline or observed before it. Only finality evidence confirms: inclusion
    alone never does.
``TIMEOUT_TREATED_AS_FAILURE``
    the deadline has passed without finality observed before it. The deadline is
    ``initiated_at + min(settlement timeout, policy max wait)``; the boundary is **inclusive**:
    at ``now >= deadline`` the waiting budget is spent, so a settlement that is still
    ``AWAITING_FINALITY`` always has ``remaining_ms > 0``. Finality observed at or after the
    deadline does not undo the timeout (the caller may already have discarded): the decision
    carries it as ``late_finality`` so that someone reconciles.
``AWAITING_FINALITY``
    anything else; the decision carries elapsed and remaining time.

The guard reads no clock: ``now`` is an argument. Each decision carries a digest of the
verdict *and* the evidence it rests on, so two decisions with the same verdict but different
evidence never share a digest.

A terminal verdict does not flip by re-evaluation alone: :func:`settle_transition` keeps it.
The one exception is an explicit :class:`Reversal` (a reorg past the confirming block, a
refund) of a ``FINALITY_CONFIRMED`` verdict, reported as a finality violation. A failure or a
timeout is never reversed into a commit: the caller may already have discarded.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from guard.canonical import digest
from guard.directive import waiting_directive
from guard.errors import InvalidPolicy
from guard.types import SettlementId, UnixMillis


class Verdict(enum.StrEnum):
    """The five answers of the settlement guard."""

    NO_SETTLEMENT = "NO_SETTLEMENT"
    AWAITING_FINALITY = "AWAITING_FINALITY"
    FINALITY_CONFIRMED = "FINALITY_CONFIRMED"
    SETTLEMENT_FAILED = "SETTLEMENT_FAILED"
    TIMEOUT_TREATED_AS_FAILURE = "TIMEOUT_TREATED_AS_FAILURE"

    @property
    def terminal(self) -> bool:
        """True for the verdicts on which dependent state is committed or discarded."""
        return self in TERMINAL_VERDICTS


TERMINAL_VERDICTS = frozenset(
    {Verdict.FINALITY_CONFIRMED, Verdict.SETTLEMENT_FAILED, Verdict.TIMEOUT_TREATED_AS_FAILURE}
)


@dataclass(frozen=True)
class Evidence:
    """A fact a verdict rests on, in a form a third party can re-check.

    ``kind`` names the fact (``depth``, ``finalized``, ``reverted``, ``replaced``,
    ``payment_failed``...); ``facts`` holds its canonical-JSON-able details (block number and
    hash, head, depth, event ids...). Floats are not allowed in ``facts``.
    """

    kind: str
    """What sort of evidence this is."""
    observed_at: UnixMillis
    """When the evidence was observed (0 is a valid instant, not "absent")."""
    facts: tuple[tuple[str, object], ...] = ()
    """Sorted key/value details; use :meth:`of` to build from keyword arguments."""

    @classmethod
    def of(cls, kind: str, observed_at: UnixMillis, **facts: object) -> Evidence:
        """Build evidence from keyword facts (sorted so equal facts compare equal)."""
        return cls(kind=kind, observed_at=observed_at, facts=tuple(sorted(facts.items())))

    def as_json(self) -> dict[str, object]:
        """The canonical-JSON form bound into digests and receipts."""
        return {"kind": self.kind, "observed_at": self.observed_at, "facts": dict(self.facts)}


@dataclass(frozen=True)
class Settlement:
    """What the caller asked us to watch."""

    settlement_id: SettlementId
    """Stable id of the settlement."""
    initiated: bool
    """Whether a settlement was started at all (False gives ``NO_SETTLEMENT``)."""
    initiated_at: UnixMillis
    """When it was started; the timeout runs from here."""
    timeout_ms: int
    """The caller's own timeout for this settlement."""


@dataclass(frozen=True)
class Observation:
    """Everything known about a settlement at one instant. ``None`` means "not observed"."""

    finality: Evidence | None = None
    """Proof of finality, if any."""
    failure: Evidence | None = None
    """Proof of failure, if any; dominates finality."""
    progress: Evidence | None = None
    """Non-final progress (inclusion, depth so far); informs but never decides."""


@dataclass(frozen=True)
class SettlementPolicy:
    """Limits set by the operator, applied to every settlement."""

    max_wait_ms: int
    """Upper bound on any settlement's wait, whatever timeout the caller asked for."""

    def __post_init__(self) -> None:
        if self.max_wait_ms <= 0:
            raise InvalidPolicy(f"max_wait_ms must be > 0, got {self.max_wait_ms}")


@dataclass(frozen=True)
class Decision:
    """A verdict, why it was reached, and a digest binding both to the evidence."""

    verdict: Verdict
    """The answer."""
    directive: str
    """One line for a human: what to do now and why."""
    settlement_id: SettlementId
    """Which settlement this is about."""
    deadline: UnixMillis | None
    """When waiting ends (None without a settlement)."""
    elapsed_ms: int
    """Time since initiation at evaluation (0 without a settlement)."""
    remaining_ms: int
    """Time left before the deadline; 0 once terminal or without a settlement."""
    evidence: Evidence | None
    """The evidence the verdict rests on (the last progress for awaiting and timeout)."""
    digest: str = field(default="")
    """``sha256:``… over the verdict, settlement, deadline and evidence."""
    late_finality: Evidence | None = None
    """On a timeout: finality evidence observed at or after the deadline (reconcile!)."""


def deadline_of(settlement: Settlement, policy: SettlementPolicy) -> UnixMillis:
    """Instant at which an unconfirmed settlement is treated as failed."""
    if settlement.timeout_ms <= 0:
        raise InvalidPolicy(f"timeout_ms must be > 0, got {settlement.timeout_ms}")
    return UnixMillis(settlement.initiated_at + min(settlement.timeout_ms, policy.max_wait_ms))


def _decide(
    verdict: Verdict,
    directive: str,
    settlement: Settlement,
    deadline: UnixMillis | None,
    elapsed_ms: int,
    remaining_ms: int,
    evidence: Evidence | None,
    late_finality: Evidence | None = None,
) -> Decision:
    bound = {
        "verdict": verdict.value,
        "settlement_id": settlement.settlement_id,
        "initiated": settlement.initiated,
        "initiated_at": settlement.initiated_at,
        "timeout_ms": settlement.timeout_ms,
        "deadline": deadline,
        "evidence": evidence.as_json() if evidence is not None else None,
    }
    if verdict is Verdict.AWAITING_FINALITY:
        bound["elapsed_ms"] = elapsed_ms
    if late_finality is not None:
        bound["late_finality"] = late_finality.as_json()
    return Decision(
        verdict=verdict,
        directive=directive,
        settlement_id=settlement.settlement_id,
        deadline=deadline,
        elapsed_ms=elapsed_ms,
        remaining_ms=remaining_ms,
        evidence=evidence,
        digest=digest(bound),
        late_finality=late_finality,
    )


def _timed_out(
    settlement: Settlement, observation: Observation, deadline: UnixMillis, elapsed: int
) -> Decision:
    """TIMEOUT_TREATED_AS_FAILURE: the deadline passed with no finality observed before it
    (finality observed at or after it is carried as ``late_finality``, to reconcile)."""
    finality = observation.finality
    late = (
        " Finality was observed only at or after the deadline: reconcile."
        if finality is not None
        else ""
    )
    return _decide(
        Verdict.TIMEOUT_TREATED_AS_FAILURE,
        f"DISCARD: settlement {settlement.settlement_id} not final by its deadline "
        f"({elapsed} ms elapsed >= {deadline - settlement.initiated_at} ms allowed); "
        f"treat as failed.{late}",
        settlement,
        deadline,
        elapsed,
        0,
        observation.progress,
        finality,
    )


def evaluate_settlement(
    settlement: Settlement,
    observation: Observation,
    policy: SettlementPolicy,
    now: UnixMillis,
) -> Decision:
    """Decide one settlement at instant ``now``. Pure: same inputs, same decision."""
    sid = settlement.settlement_id
    if not settlement.initiated:
        return _decide(
            Verdict.NO_SETTLEMENT,
            f"PROCEED: no settlement initiated for {sid}; nothing to commit or discard.",
            settlement,
            None,
            0,
            0,
            None,
        )
    deadline = deadline_of(settlement, policy)
    elapsed = max(0, now - settlement.initiated_at)
    if observation.failure is not None:
        return _decide(
            Verdict.SETTLEMENT_FAILED,
            f"DISCARD: settlement {sid} failed ({observation.failure.kind}); "
            "do not commit dependent state.",
            settlement,
            deadline,
            elapsed,
            0,
            observation.failure,
        )
    finality = observation.finality
    if finality is not None and (now < deadline or finality.observed_at < deadline):
        return _decide(
            Verdict.FINALITY_CONFIRMED,
            f"COMMIT: settlement {sid} is final ({finality.kind}); commit dependent state.",
            settlement,
            deadline,
            elapsed,
            0,
            finality,
        )
    if now >= deadline:
        return _timed_out(settlement, observation, deadline, elapsed)
    remaining = deadline - now
    return _decide(
        Verdict.AWAITING_FINALITY,
        waiting_directive(sid, settlement.initiated_at, deadline, now),
        settlement,
        deadline,
        elapsed,
        remaining,
        observation.progress,
    )


class TransitionKind(enum.StrEnum):
    """How a new decision relates to the stored one."""

    UNCHANGED = "unchanged"
    """Same verdict as before (evidence may have progressed)."""
    ADVANCED = "advanced"
    """A non-terminal verdict moved on (to terminal or another non-terminal)."""
    HELD = "held"
    """A terminal verdict was kept although re-evaluation said otherwise."""
    LATE_FINALITY = "late_finality"
    """Finality arrived after the settlement was timed out; the timeout stands."""
    REVERSED = "reversed"
    """A terminal verdict was undone by an explicit reversal (finality violation)."""


@dataclass(frozen=True)
class Reversal:
    """Explicit evidence that a terminal verdict's ground is gone (a reorg past its block)."""

    reason: str
    """Why the verdict no longer holds, e.g. ``reorg of depth 5 past block 812``."""
    evidence: Evidence
    """The facts of the reversal (old and new hashes, common ancestor...)."""


@dataclass(frozen=True)
class Transition:
    """The decision to store, and what kind of change it is."""

    kind: TransitionKind
    """How the verdict moved."""
    decision: Decision
    """The decision that now stands."""
    finality_violation: bool
    """True when a confirmed settlement lost its finality: always raise this loudly."""


def restated(decision: Decision, settlement: Settlement, evidence: Evidence) -> Decision:
    """``decision`` resting on ``evidence`` (a reorg replaced the head block its evidence
    named, above an inclusion it left standing): same verdict and times, a new digest."""
    d = decision
    args = (d.deadline, d.elapsed_ms, d.remaining_ms, evidence, d.late_finality)
    return _decide(d.verdict, d.directive, settlement, *args)


def settle_transition(
    previous: Decision | None, fresh: Decision, reversal: Reversal | None = None
) -> Transition:
    """Combine the stored decision with a fresh evaluation.

    A terminal verdict stands, unless it is ``FINALITY_CONFIRMED`` and ``reversal`` is given
    (``REVERSED``, a finality violation). A ``reversal`` of a failure or a timeout is ignored:
    they are never turned into a commit. Finality observed after the deadline is reported as
    ``LATE_FINALITY`` and the timeout stands.
    """
    if previous is None or not previous.verdict.terminal:
        if fresh.late_finality is not None:
            return Transition(TransitionKind.LATE_FINALITY, fresh, False)
        if previous is not None and previous.verdict is fresh.verdict:
            return Transition(TransitionKind.UNCHANGED, fresh, False)
        return Transition(TransitionKind.ADVANCED, fresh, False)
    if reversal is not None and previous.verdict is Verdict.FINALITY_CONFIRMED:
        return Transition(TransitionKind.REVERSED, fresh, True)
    if previous.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE and (
        fresh.verdict is Verdict.FINALITY_CONFIRMED or fresh.late_finality is not None
    ):
        return Transition(TransitionKind.LATE_FINALITY, previous, False)
    if previous.verdict is fresh.verdict:
        return Transition(TransitionKind.UNCHANGED, previous, False)
    return Transition(TransitionKind.HELD, previous, False)


def evidence_from_json(data: object) -> Evidence | None:
    """Inverse of :meth:`Evidence.as_json` (None stays None)."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise TypeError(f"evidence must be an object, got {type(data).__name__}")
    facts = data.get("facts", {})
    if not isinstance(facts, dict):
        raise TypeError(f"evidence facts must be an object, got {type(facts).__name__}")
    return Evidence(
        kind=str(data["kind"]),
        observed_at=UnixMillis(int(data["observed_at"])),
        facts=tuple(sorted(facts.items())),
    )


def decision_as_json(decision: Decision) -> dict[str, object]:
    """A decision as a JSON object (what the store keeps and the API shows)."""
    return {
        "verdict": decision.verdict.value,
        "directive": decision.directive,
        "settlement_id": decision.settlement_id,
        "deadline": decision.deadline,
        "elapsed_ms": decision.elapsed_ms,
        "remaining_ms": decision.remaining_ms,
        "evidence": decision.evidence.as_json() if decision.evidence is not None else None,
        "late_finality": (
            decision.late_finality.as_json() if decision.late_finality is not None else None
        ),
        "digest": decision.digest,
    }


def decision_from_json(data: dict[str, object]) -> Decision:
    """Inverse of :func:`decision_as_json`."""
    deadline = data.get("deadline")
    return Decision(
        verdict=Verdict(str(data["verdict"])),
        directive=str(data["directive"]),
        settlement_id=SettlementId(str(data["settlement_id"])),
        deadline=None if deadline is None else UnixMillis(int(str(deadline))),
        elapsed_ms=int(str(data["elapsed_ms"])),
        remaining_ms=int(str(data["remaining_ms"])),
        evidence=evidence_from_json(data.get("evidence")),
        digest=str(data["digest"]),
        late_finality=evidence_from_json(data.get("late_finality")),
    )
