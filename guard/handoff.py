"""The handoff guard: may a successor take over work that its predecessor left mid-way?

A *handoff* is a change of the instance that processes a chain (or a source). Control
transfer (the successor holds the lease) is not enough: the successor must also know what
was done (a checkpoint), what was started and not known finished (an in-flight registry),
that the predecessor can no longer write (the lock: a fencing token it no longer holds),
and how to learn the real state of each in-flight operation (recovery predicates).

:func:`evaluate_handoff` is the decision boundary, a free function over frozen values:

1. The successor does not hold the lock → ``LOCK_NOT_HELD``: it must not act at all, not
   even on a handoff with nothing mid-way, since the predecessor may still write. (The
   sketch this grew from reported this as ``IN_FLIGHT_UNTRACKED``, which hid the cause.)
2. Nothing mid-way (nothing started, or everything finished, and nothing in flight) →
   ``NO_TRANSACTION``: a standard handoff.
3. No checkpoint → ``CHECKPOINT_MISSING``, unless the exception holds.
4. No in-flight registry, or an operation observed in flight that the registry does not
   list → ``IN_FLIGHT_UNTRACKED``, unless the exception holds. (The sketch took the mere
   presence of a tuple as proof that operations were tracked.)
5. Otherwise ``HANDOFF_SAFE``.

The exception (the seed's "proceed without a full checkpoint"): only when the remaining work
is strictly idempotent *and* a recovery predicate actually ran and found no partial side
effect that matters. Either alone is not enough; a predicate that was not run proves
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from guard.canonical import digest


class HandoffVerdict(Enum):
    """What the successor may do with the work it takes over."""

    NO_TRANSACTION = "NO_TRANSACTION"
    """Nothing was mid-way: a standard handoff."""
    HANDOFF_SAFE = "HANDOFF_SAFE"
    """Mid-way, but the successor knows exactly where and holds the lock: resume."""
    CHECKPOINT_MISSING = "CHECKPOINT_MISSING"
    """Mid-way with no checkpoint: do not resume blindly; rebuild from the source of truth."""
    IN_FLIGHT_UNTRACKED = "IN_FLIGHT_UNTRACKED"
    """Operations may be in flight that nobody recorded: retrying them could duplicate."""
    LOCK_NOT_HELD = "LOCK_NOT_HELD"
    """The successor does not hold the lock: the predecessor may still write; do nothing."""


@dataclass(frozen=True)
class RecoveryOutcome:
    """The result of running one recovery predicate (a check of the real state)."""

    operation: str
    """The in-flight operation it checked (its registry id)."""
    predicate: str
    """What was checked, e.g. ``reread_header_window_from_ancestor``."""
    outcome: str
    """What it found, in words (stored in the record)."""
    material_partial_effect: bool
    """True when it found a partial side effect with consequences (so resuming is unsafe)."""


@dataclass(frozen=True)
class HandoffState:
    """Everything the successor knows at takeover, as plain facts."""

    transaction_id: str
    """What is handed over (for the daemon: the chain or source name)."""
    steps_total: int
    """Steps of the work in hand (for the daemon: settlements and deliveries not done + done)."""
    steps_completed: int
    """Steps known finished."""
    in_flight_observed: frozenset[str] = frozenset()
    """Operations the successor sees started and not known finished."""
    checkpoint_digest: str | None = None
    """Digest of the predecessor's checkpoint; None or empty: there is none."""
    in_flight_registry: frozenset[str] | None = None
    """Operations the registry lists; None: there is no registry."""
    lock_held: bool = False
    """The successor holds the lease with a token above every token the predecessor had."""
    remaining_idempotent: bool = False
    """Re-doing the remaining work has no extra effect (e.g. deliveries keyed by
    Idempotency-Key, block processing in one transaction)."""
    recovery: tuple[RecoveryOutcome, ...] = field(default=())
    """Recovery predicates that ran, and their outcomes."""


@dataclass(frozen=True)
class HandoffDecision:
    """The verdict, why, and a digest binding it to the facts it was made from."""

    verdict: HandoffVerdict
    """The verdict."""
    directive: str
    """One line for people: what the successor does."""
    exception_applied: bool
    """True when the work proceeds without a full checkpoint or registry by the exception."""
    digest: str
    """``sha256:`` digest of the facts and the verdict."""


def _mid_transaction(state: HandoffState) -> bool:
    if state.in_flight_observed:
        return True
    return 0 < state.steps_completed < state.steps_total


def exception_holds(state: HandoffState) -> bool:
    """The seed's exception: idempotent remaining work, and recovery ran and found nothing
    material (at least one predicate per observed in-flight operation, none material)."""
    if not state.remaining_idempotent or not state.recovery:
        return False
    if any(r.material_partial_effect for r in state.recovery):
        return False
    checked = {r.operation for r in state.recovery}
    return state.in_flight_observed <= checked


def _facts(state: HandoffState) -> dict[str, object]:
    return {
        "transaction_id": state.transaction_id,
        "steps_total": state.steps_total,
        "steps_completed": state.steps_completed,
        "in_flight_observed": sorted(state.in_flight_observed),
        "checkpoint_digest": state.checkpoint_digest,
        "in_flight_registry": (
            None if state.in_flight_registry is None else sorted(state.in_flight_registry)
        ),
        "lock_held": state.lock_held,
        "remaining_idempotent": state.remaining_idempotent,
        "recovery": [
            [r.operation, r.predicate, r.outcome, r.material_partial_effect] for r in state.recovery
        ],
    }


def _decide(
    state: HandoffState, verdict: HandoffVerdict, directive: str, exc: bool
) -> HandoffDecision:
    body = {"facts": _facts(state), "verdict": verdict.value, "exception_applied": exc}
    return HandoffDecision(verdict, directive, exc, digest(body))


def evaluate_handoff(state: HandoffState) -> HandoffDecision:
    """Apply the decision boundary (see the module doc) to ``state``."""
    tid = state.transaction_id
    if state.steps_completed < 0 or state.steps_total < 0:
        raise ValueError(f"{tid}: step counts must not be negative")
    if not state.lock_held:
        return _decide(
            state,
            HandoffVerdict.LOCK_NOT_HELD,
            f"HALT: the successor does not hold the lock on {tid}; the predecessor may write",
            False,
        )
    if not _mid_transaction(state):
        return _decide(
            state, HandoffVerdict.NO_TRANSACTION, f"PROCEED: nothing of {tid} mid-way", False
        )
    exception = exception_holds(state)
    if not state.checkpoint_digest:
        if exception:
            return _decide(
                state,
                HandoffVerdict.HANDOFF_SAFE,
                f"PROCEED: {tid} has no checkpoint, but the remaining work is idempotent "
                "and recovery found no material partial effect",
                True,
            )
        return _decide(
            state,
            HandoffVerdict.CHECKPOINT_MISSING,
            f"REBUILD: {tid} is mid-way without a checkpoint; rebuild from the source of truth",
            False,
        )
    registry = state.in_flight_registry
    untracked = (
        state.in_flight_observed if registry is None else state.in_flight_observed - registry
    )
    if registry is None or untracked:
        if exception:
            return _decide(
                state,
                HandoffVerdict.HANDOFF_SAFE,
                f"PROCEED: {tid} has untracked in-flight work, but it is idempotent and "
                "recovery found no material partial effect",
                True,
            )
        return _decide(
            state,
            HandoffVerdict.IN_FLIGHT_UNTRACKED,
            f"HALT: {tid} has {len(untracked)} in-flight operation(s) no registry lists",
            False,
        )
    return _decide(
        state,
        HandoffVerdict.HANDOFF_SAFE,
        f"PROCEED: resume {tid} at step {state.steps_completed}/{state.steps_total} "
        f"with {len(state.in_flight_observed)} tracked in-flight operation(s)",
        False,
    )
