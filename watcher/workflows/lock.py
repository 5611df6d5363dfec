"""A change of a workflow's lock under the handoff guard, and its four signed receipts.

Whenever the lock changes hands (the creator takes it first; a successor takes it over once
the predecessor released it or its lease lapsed) the watcher applies the pure guard
(:func:`guard.handoff.evaluate_handoff`) to the workflow's facts and signs the seed's four
recorded elements (:mod:`guard.handoff_receipts`; the checkpoint is
:mod:`guard.workflow_checkpoint`'s). How a workflow's facts map onto the guard's:

- steps total and completed: the workflow's steps;
- in flight observed: every step ``in_flight``;
- checkpoint: the steps as the last write recorded them (their digest, written with them):
  *missing* when the stored steps no longer match it (a row changed outside the watcher,
  or restored from a backup of another moment), so nothing in them can be trusted;
- in-flight registry: the in-flight steps whose real state can be learned
  (:func:`watcher.workflows.recovery.tracked`);
- lock held: the successor's token is above the predecessor's (always, after a takeover;
  a takeover refused while the lease is live is evaluated with ``lock_held`` False);
- remaining idempotent: every step not completed is declared idempotent;
- recovery: what the watcher learned of each in-flight step that has a way to be checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from guard.handoff import HandoffDecision, HandoffState, HandoffVerdict, RecoveryOutcome
from guard.handoff import evaluate_handoff as guard_evaluate
from guard.handoff_receipts import CHECKPOINT, LOCK, RECOVERY, REGISTRY, Takeover
from guard.receipts import OFFCHAIN_CHAIN_ID
from guard.workflow_checkpoint import WORKFLOW_KIND, workflow_name
from watcher.handoff.takeover import Sealer, signed_element
from watcher.workflows.recovery import COMPLETED, PENDING, how_learned, tracked
from watcher.workflows.steps import IN_FLIGHT, steps_digest


@dataclass(frozen=True)
class Facts:
    """A workflow as the guard is asked about it."""

    workflow_id: str
    """The workflow."""
    reference: str | None
    """The caller's reference."""
    steps: list[dict[str, Any]]
    """The stored steps."""
    idempotent: list[str]
    """Steps declared idempotent."""
    checkpoint_digest: str
    """The digest the last write recorded with the steps."""
    resolved: list[dict[str, Any]]
    """Recovery's answer for each in-flight step (:class:`~watcher.workflows.recovery.Recovery`)."""


@dataclass(frozen=True)
class LockChange:
    """Who held the lock and who holds it now (the lock element)."""

    from_holder: str | None
    """The predecessor (None: the creator takes the lock first)."""
    from_token: int | None
    """The predecessor's fencing token."""
    from_expires_at: int | None
    """When the predecessor's lease ended (0: released)."""
    to_holder: str
    """The new holder."""
    to_token: int
    """The new fencing token (the predecessor's plus one)."""
    acquired_at: int
    """When the new holder took the lock (ms)."""
    expires_at: int
    """When its lease lapses unless renewed (ms)."""
    reason: str
    """``first``, ``released`` or ``expired``."""


def evaluate(facts: Facts, lock_held: bool) -> HandoffDecision:
    """The guard's decision on ``facts``."""
    return guard_evaluate(_state(facts, lock_held))


def _state(facts: Facts, lock_held: bool) -> HandoffState:
    idempotent = set(facts.idempotent)
    flying = [s for s in facts.steps if s["state"] == IN_FLIGHT]
    intact = steps_digest(facts.steps) == facts.checkpoint_digest
    return HandoffState(
        transaction_id=facts.workflow_id,
        steps_total=len(facts.steps),
        steps_completed=sum(1 for s in facts.steps if s["state"] == "completed"),
        in_flight_observed=frozenset(s["name"] for s in flying),
        checkpoint_digest=facts.checkpoint_digest if intact else None,
        in_flight_registry=frozenset(s["name"] for s in flying if tracked(s, idempotent)),
        lock_held=lock_held,
        remaining_idempotent=all(
            s["name"] in idempotent for s in facts.steps if s["state"] != "completed"
        ),
        recovery=tuple(
            RecoveryOutcome(c["operation"], c["predicate"], c["outcome"], c["material"])
            for c in _checks(facts)
            if c["predicate"] != "none"
        ),
    )


def _checks(facts: Facts) -> list[dict[str, Any]]:
    """The recovery element's checks: per in-flight step, how its state was learned and
    what was found (material: it did or may still take effect, so it must not run again)."""
    idempotent = set(facts.idempotent)
    steps = {s["name"]: s for s in facts.steps}
    checks = []
    for entry in facts.resolved:
        step = steps[entry["step"]]
        predicate = how_learned(step, idempotent)
        settled = predicate.startswith("settlement_verdict:")
        checks.append(
            {
                "operation": entry["step"],
                "predicate": predicate,
                "outcome": entry["state"],
                "material": settled and entry["state"] in (COMPLETED, PENDING),
            }
        )
    return checks


def directive_of(decision: HandoffDecision, facts: Facts) -> str:
    """The guard's directive, with what it means for this workflow's in-flight steps."""
    registry = _state(facts, True).in_flight_registry or frozenset()
    untracked = [
        s["name"] for s in facts.steps if s["state"] == IN_FLIGHT and s["name"] not in registry
    ]
    verdict = decision.verdict
    if verdict is HandoffVerdict.IN_FLIGHT_UNTRACKED:
        return (
            f"{decision.directive}: do not retry {', '.join(untracked)} blindly; nothing "
            "records how to learn its real state: ask whoever carried it out, then complete it"
        )
    if verdict is HandoffVerdict.CHECKPOINT_MISSING:
        return (
            f"{decision.directive}: the stored steps do not match the checkpoint the last "
            "write recorded; re-read each step's real state before acting on any of them"
        )
    if verdict is HandoffVerdict.HANDOFF_SAFE:
        states = ", ".join(f"{e['step']} {e['state']}" for e in facts.resolved)
        return (
            f"{decision.directive} ({states}): complete a step recovery says completed, "
            "re-begin nothing in flight; re-run only what recovery says is safe to re-run"
        )
    return decision.directive


def record(facts: Facts, change: LockChange, at: int, signer: Sealer) -> dict[str, Any]:
    """The guard's decision on ``facts`` and the four signed receipts of ``change``: what is
    stored as the workflow's last handoff and answered by a takeover."""
    decision = evaluate(facts, lock_held=True)
    name = workflow_name(facts.workflow_id)
    takeover = Takeover(
        name=name,
        chain_id=OFFCHAIN_CHAIN_ID,
        from_owner=change.from_holder,
        from_token=change.from_token,
        to_owner=change.to_holder,
        to_token=change.to_token,
        reason=change.reason,
        at=at,
        verdict=decision.verdict.value,
        decision_digest=decision.digest,
    )
    elements = _elements(facts, change, name)
    return {
        "verdict": decision.verdict.value,
        "directive": directive_of(decision, facts),
        "exception_applied": decision.exception_applied,
        "decision_digest": decision.digest,
        "fencing_token": change.to_token,
        "reason": change.reason,
        "at": at,
        "recovery": facts.resolved,
        "receipts": {
            kind: signed_element(signer, kind, body, takeover) for kind, body in elements.items()
        },
    }


def _elements(facts: Facts, change: LockChange, name: str) -> dict[str, dict[str, Any]]:
    """The four recorded elements of ``change``, in the order they are recorded."""
    idempotent = set(facts.idempotent)
    return {
        CHECKPOINT: {
            "name": name,
            "kind": WORKFLOW_KIND,
            "workflow_id": facts.workflow_id,
            "reference": facts.reference,
            "steps": facts.steps,
            "idempotent_steps": facts.idempotent,
            "steps_digest": steps_digest(facts.steps),
        },
        REGISTRY: {
            "name": name,
            "operations": [
                {
                    "id": s["name"],
                    "kind": "workflow_step",
                    "operation": s["operation"],
                    "recovery": s["recovery"],
                    "tracked": tracked(s, idempotent),
                }
                for s in facts.steps
                if s["state"] == IN_FLIGHT
            ],
        },
        LOCK: {
            "name": name,
            "from_owner": change.from_holder,
            "from_token": change.from_token,
            "from_expires_at": change.from_expires_at,
            "to_owner": change.to_holder,
            "to_token": change.to_token,
            "acquired_at": change.acquired_at,
            "expires_at": change.expires_at,
            "reason": change.reason,
        },
        RECOVERY: {"name": name, "checks": _checks(facts)},
    }
