"""Recovery: the real state of each in-flight step, learned by the watcher itself.

A step begun with ``recovery: {"settlement_id": ...}`` is answered from that settlement's
verdict, which the watcher is following anyway: ``FINALITY_CONFIRMED`` → ``completed``
(evidence: the signed finality receipt; until it is signed the step still reads
``pending``), ``SETTLEMENT_FAILED`` / ``TIMEOUT_TREATED_AS_FAILURE`` → ``failed`` (evidence:
the failure or timeout receipt, once signed), anything else → ``pending`` (depth, required
depth, deadline). This is what stops the double charge: a successor learns the charge went
through instead of guessing.

A step begun with an ``idempotency_key`` on a step the caller declared idempotent reads
``pending``: re-running it with the same key is safe. With neither, an idempotent step is
``pending`` too (re-running it is safe by declaration); any other step is ``unknown``:
nothing can tell whether it took effect, so it must not be retried blindly.
"""

from __future__ import annotations

from typing import Any

from guard.receipts import VERDICT_KIND
from guard.settlement import Verdict
from watcher.settlements import depth_of
from watcher.store.errors import SettlementNotFound
from watcher.store.receipts_store import receipt_store
from watcher.store.store import Store
from watcher.workflows.steps import IN_FLIGHT

COMPLETED = "completed"
FAILED = "failed"
PENDING = "pending"
UNKNOWN = "unknown"
RESOLVED_STATES = (COMPLETED, FAILED, PENDING, UNKNOWN)
"""What recovery says of an in-flight step."""


def tracked(step: dict[str, Any], idempotent: set[str]) -> bool:
    """Whether the step's real state can be learned (so the in-flight registry lists it):
    a settlement to read, or an idempotency key on an idempotent step."""
    recovery = step.get("recovery") or {}
    if "settlement_id" in recovery:
        return True
    return "idempotency_key" in recovery and step["name"] in idempotent


def how_learned(step: dict[str, Any], idempotent: set[str]) -> str:
    """The recovery predicate of a step, as one name (what the registry says of it)."""
    recovery = step.get("recovery") or {}
    if "settlement_id" in recovery:
        return f"settlement_verdict:{recovery['settlement_id']}"
    if tracked(step, idempotent):
        return "rerun_with_idempotency_key"
    if step["name"] in idempotent:
        return "rerun_idempotent_step"
    return "none"


class Recovery:
    """Resolves in-flight steps of ``owner``'s workflows against the store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.receipts = receipt_store(store)

    def resolve(
        self, steps: list[dict[str, Any]], idempotent: set[str], owner: str
    ) -> list[dict[str, Any]]:
        """One entry per in-flight step: step, operation, recovery, state, evidence."""
        out = []
        for step in steps:
            if step["state"] != IN_FLIGHT:
                continue
            state, evidence = self._state(step, idempotent, owner)
            out.append(
                {
                    "step": step["name"],
                    "operation": step["operation"],
                    "recovery": step["recovery"],
                    "state": state,
                    "evidence": evidence,
                }
            )
        return out

    def _state(
        self, step: dict[str, Any], idempotent: set[str], owner: str
    ) -> tuple[str, dict[str, Any]]:
        recovery = step.get("recovery") or {}
        if "settlement_id" in recovery:
            return self._settlement(str(recovery["settlement_id"]), owner)
        if tracked(step, idempotent):
            return PENDING, {
                "idempotency_key": recovery["idempotency_key"],
                "why": "the step is idempotent: re-run it with the same idempotency key, "
                "the receiver applies it at most once",
            }
        if step["name"] in idempotent:
            return PENDING, {"why": "the step is declared idempotent: re-running it is safe"}
        return UNKNOWN, {
            "why": "begun with no settlement and no idempotency key, and not idempotent: "
            "nothing can tell whether it took effect; do not retry it blindly, check with "
            "whoever carried it out"
        }

    def _settlement(self, settlement_id: str, owner: str) -> tuple[str, dict[str, Any]]:
        try:
            rec = self.store.settlement(settlement_id, owner=owner)
        except SettlementNotFound:
            return UNKNOWN, {"settlement_id": settlement_id, "why": "no such settlement"}
        chain = self.store.chain(rec.chain)
        facts: dict[str, Any] = {
            "settlement_id": settlement_id,
            "verdict": rec.verdict,
            "block_number": rec.block_number,
            "confirmations": depth_of(rec.block_number, chain.head_number if chain else None),
            "required_confirmations": rec.required_confirmations,
            "deadline": rec.deadline,
        }
        kind = VERDICT_KIND.get(rec.verdict)
        if kind is None:
            return PENDING, facts
        receipt = self.receipts.latest(settlement_id, (kind,))
        if receipt is None:  # decided, not yet signed: say so rather than claim without proof
            return PENDING, {**facts, "why": "decided; its signed receipt is being made"}
        state = COMPLETED if rec.verdict == Verdict.FINALITY_CONFIRMED else FAILED
        return state, {**facts, "receipt": receipt.body}
