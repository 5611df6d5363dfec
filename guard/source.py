"""Settlement sources: the one interface through which every kind of settlement is observed.

A *source* is whatever can tell how a settlement is going: an EVM chain (a transaction), a
payment processor (a Stripe PaymentIntent), a job queue (an RQ job, a Celery task). The guard
does not care which. Each source translates its own vocabulary into the six statuses below,
with the evidence each rests on, and :func:`evaluate_source` hands that to
:func:`guard.settlement.evaluate_settlement`. So every source gets the same five verdicts,
the same transitions (a terminal verdict holds; only an explicit reversal of a confirmation
undoes it), and downstream the same events, receipts and deliveries.

The vocabulary (:class:`SourceStatus`):

``unknown``    the source does not know the reference (not yet, or no longer).
``initiated``  it exists and has no outcome yet: a pending tx, a payment processing or
               awaiting capture, a job queued or running.
``accepted``   a positive outcome that can still be undone: a tx included but shallow, a
               payment that succeeded but whose funds have not settled.
``final``      the outcome will not be undone: commit.
``failed``     a negative outcome: reverted, payment declined or canceled, job raised.
``reversed``   a positive outcome taken back: a refund, a dispute. A failure; and when the
               settlement was already confirmed, a *finality violation* (the same alert as a
               reorg deeper than a confirmed block).

A source works in two steps so that the decision stays pure and repeatable:
:meth:`SettlementSource.fetch` asks the world (HTTP, Redis) and returns a :class:`Snapshot`;
:meth:`SettlementSource.observe` turns a snapshot, plus the evidence stored with the last
decision (the source's memory: event ids seen, when a payment succeeded), into a
:class:`SourceObservation` without I/O and without reading a clock. A webhook is just
another way to obtain a snapshot.

Errors::

    GuardError
    └── SourceError                   a source refused a reference or could not answer
        ├── InvalidRef(ValueError)    the reference cannot name a settlement of this kind
        └── SourceUnavailable         the source could not be asked now (network, auth,
                                      Redis down); nothing was observed: try again later
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from guard.canonical import MAX_SAFE_INTEGER, digest
from guard.errors import GuardError
from guard.settlement import (
    Decision,
    Evidence,
    Observation,
    Reversal,
    Settlement,
    SettlementPolicy,
    evaluate_settlement,
)
from guard.types import UnixMillis

MAX_REF_LENGTH = 66
"""Longest reference a source settlement may have (it is stored where a tx hash goes)."""

_REF_CHARS = re.compile(r"[\x21-\x7e]+")
"""Printable ASCII without spaces: what any reference is made of, whatever its kind."""


class SourceError(GuardError):
    """Base of the errors a source raises in normal operation."""


class InvalidRef(SourceError, ValueError):
    """A reference that cannot name a settlement of this kind; ``field`` is always ``ref``."""

    def __init__(self, ref: object, reason: str) -> None:
        shown = repr(ref)
        super().__init__(f"ref: {reason}" + (f" (got {shown})" if len(shown) <= 40 else ""))
        self.field = "ref"
        self.ref = ref
        self.reason = reason


class SourceUnavailable(SourceError):
    """The source could not be asked (network, authentication, rate limit, Redis down).

    Nothing was observed: a caller must not draw any conclusion from it, only retry."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"source {source!r} unavailable: {reason}")
        self.source = source
        self.reason = reason


class SourceStatus(enum.StrEnum):
    """Where a settlement stands according to its source (see the module doc)."""

    UNKNOWN = "unknown"
    INITIATED = "initiated"
    ACCEPTED = "accepted"
    FINAL = "final"
    FAILED = "failed"
    REVERSED = "reversed"


@dataclass(frozen=True)
class Snapshot:
    """What a source said about one reference at one instant, before interpretation."""

    ref: str
    """The reference asked about (tx hash, PaymentIntent id, job id, task id)."""
    observed_at: UnixMillis
    """When the source answered (or when the webhook carrying it was received)."""
    objects: Mapping[str, object] = field(default_factory=dict)
    """The source's own objects, as JSON-like values (a PaymentIntent, a job's hash...)."""
    event_ids: tuple[str, ...] = ()
    """Ids of the source's events this snapshot came from (webhooks), for the evidence."""


@dataclass(frozen=True)
class SourceObservation:
    """A snapshot interpreted: the status, and the evidence it rests on."""

    ref: str
    """The reference observed."""
    status: SourceStatus
    """Where the settlement stands."""
    evidence: Evidence | None = None
    """The facts behind ``status``; required for every status except ``unknown``."""
    cutoff: UnixMillis | None = None
    """The source has established that no outcome can come after this instant (the worker
    running the job died): the wait ends there instead of at the deadline."""

    def __post_init__(self) -> None:
        if self.evidence is None and self.status is not SourceStatus.UNKNOWN:
            raise ValueError(f"a {self.status} observation of {self.ref!r} needs evidence")


class SettlementSource(Protocol):
    """One configured source: the port every adapter implements.

    Implementations live outside guard/ (they do I/O); they are found by kind through the
    ``finality_watcher.sources`` entry points (see watcher/sources/registry.py).
    """

    kind: str
    """The settlement kind it serves (``stripe_payment_intent``, ``rq_job``...): at most 32
    characters, lower-case."""
    name: str
    """The configured name of this source (stored as the settlement's ``chain``)."""
    reversible: bool
    """Whether a final outcome can be taken back later (a refund, a dispute): confirmed
    settlements are then still watched for a while, to catch the reversal."""

    def check_ref(self, ref: str) -> str:
        """The reference in canonical form; raises :class:`InvalidRef` naming why not."""
        ...

    def fetch(self, ref: str, now: UnixMillis) -> Snapshot | None:
        """Ask the source about ``ref``. None when this source has nothing to ask (it learns
        by webhooks only). Raises :class:`SourceUnavailable`; never raises for a reference
        the source does not know (that is a snapshot saying so)."""
        ...

    def observe(
        self, ref: str, snapshot: Snapshot | None, previous: Evidence | None, now: UnixMillis
    ) -> SourceObservation:
        """Interpret ``snapshot`` (None: nothing new) on top of ``previous``, the evidence of
        the stored decision. Pure: no I/O, no clock; raises nothing for odd source data (an
        unrecognised state is ``initiated`` with the state named in the evidence)."""
        ...

    def close(self) -> None:
        """Release connections; the source is not used afterwards."""
        ...


def check_ref_text(ref: object, pattern: re.Pattern[str] | None = None, what: str = "") -> str:
    """Validate what every reference must be (a string of 1..66 printable ASCII characters
    without spaces) and, if given, match ``pattern``; raises :class:`InvalidRef`."""
    if not isinstance(ref, str):
        raise InvalidRef(ref, "must be a string")
    if not ref:
        raise InvalidRef(ref, "must not be empty")
    if len(ref) > MAX_REF_LENGTH:
        raise InvalidRef(ref, f"must be at most {MAX_REF_LENGTH} characters, got {len(ref)}")
    if not _REF_CHARS.fullmatch(ref):
        raise InvalidRef(ref, "must be printable ASCII without spaces")
    if pattern is not None and not pattern.fullmatch(ref):
        raise InvalidRef(ref, f"is not {what or 'a valid reference'}")
    return ref


def observation_of(obs: SourceObservation) -> Observation:
    """The guard's :class:`Observation` for a source observation.

    ``final`` is finality evidence; ``failed`` and ``reversed`` are failure evidence (failure
    dominates); everything else only informs (progress)."""
    if obs.status is SourceStatus.FINAL:
        return Observation(finality=obs.evidence)
    if obs.status in (SourceStatus.FAILED, SourceStatus.REVERSED):
        return Observation(failure=obs.evidence)
    return Observation(progress=obs.evidence)


def reversal_of(obs: SourceObservation) -> Reversal | None:
    """The explicit reversal a ``reversed`` observation carries (None otherwise).

    :func:`guard.settlement.settle_transition` applies it only to a confirmed settlement
    (a finality violation); for any other verdict the observation is a plain failure."""
    if obs.status is not SourceStatus.REVERSED or obs.evidence is None:
        return None
    return Reversal(reason=f"{obs.evidence.kind} of {obs.ref}", evidence=obs.evidence)


def evaluate_source(
    settlement: Settlement, obs: SourceObservation, policy: SettlementPolicy, now: UnixMillis
) -> Decision:
    """Decide a source settlement: :func:`evaluate_settlement` of :func:`observation_of`.

    A ``cutoff`` (a lost worker) narrows the wait: the policy's ceiling becomes the time from
    initiation to the cutoff (at least 1 ms), so once ``now`` reaches it the verdict is
    ``TIMEOUT_TREATED_AS_FAILURE``, the decision's ``deadline`` says when, and its evidence
    says why. Waiting longer for a job nobody runs would only delay the discard."""
    if obs.cutoff is not None and obs.status not in (
        SourceStatus.FINAL,
        SourceStatus.FAILED,
        SourceStatus.REVERSED,
    ):
        budget = max(1, obs.cutoff - settlement.initiated_at)
        policy = SettlementPolicy(max_wait_ms=min(policy.max_wait_ms, budget))
    return evaluate_settlement(settlement, observation_of(obs), policy, now)


def same_evidence(a: Evidence | None, b: Evidence | None) -> bool:
    """Whether two evidences state the same facts, whenever each was observed.

    A poller re-observes every round; only a change of facts is worth a stored decision."""
    if a is None or b is None:
        return a is b
    return a.kind == b.kind and a.facts == b.facts


def facts_of(evidence: Evidence | None) -> dict[str, object]:
    """The facts of ``evidence`` as a dict (empty for None)."""
    return {} if evidence is None else dict(evidence.facts)


def _plain(value: object) -> object:
    """A vendor's JSON value made canonical-JSON-able: floats become their Python ``repr``,
    integers beyond 2**53 - 1 their decimal string."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INTEGER:
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def objects_digest(value: object) -> str:
    """``sha256:`` digest of a source's objects in canonical JSON.

    Vendors send floats now and then (an exchange rate): they are digested as their
    shortest round-trip decimal string (huge integers as decimal strings), so the digest
    exists for any JSON a source returns and anyone holding the same objects recomputes it.
    Raises :class:`~guard.canonical.CanonicalError` for a value that is not JSON at all."""
    return digest(_plain(value))
