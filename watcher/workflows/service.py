"""The workflow operations: create, begin and complete a step, renew, release, take over.

Every write runs in one store transaction holding the workflow's row
(:meth:`~watcher.store.workflows_store.WorkflowStore.locked`): the fencing token is checked
against the stored one, the step's move is applied (:mod:`watcher.workflows.steps`), the
new steps and their digest (the checkpoint) are stored, and the event and its alert
deliveries are written, all or nothing. A refusal (:class:`WorkflowRefused`) rolls it all
back: nothing stored changes. Step writes (begin, complete) share their transaction with
the other step writes waiting at the same moment (:mod:`watcher.workflows.writer`: one
commit for many, each still checked against its row as the writes before it left it).
Time comes from the injected clock, never read elsewhere.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from watcher.clock import Clock
from watcher.delivery.plan import OutboxPlan
from watcher.handoff.takeover import Sealer
from watcher.store.store import Store
from watcher.store.workflows_store import (
    WORKFLOW_ID_PREFIX,
    WorkflowRecord,
    WorkflowTxn,
)
from watcher.workflows import lock, steps
from watcher.workflows.lock import Facts, LockChange
from watcher.workflows.recovery import Recovery, how_learned, tracked
from watcher.workflows.step_writes import StepWrites, workflow_event
from watcher.workflows.steps import WorkflowRefused, not_found

MAX_PAGE = 1000
"""Largest page of ``GET /v1/workflows``."""


def lease_state(rec: WorkflowRecord, now: int) -> str:
    """``held`` (live), ``expired`` (lapsed, not yet taken over) or ``released``."""
    if rec.lease_expires_at == 0:
        return "released"
    return "held" if rec.lease_expires_at > now else "expired"


class WorkflowService:
    """Workflows of the API's callers over the store (any daemon instance of it)."""

    def __init__(
        self, store: Store, signer: Sealer, clock: Clock, plan: Callable[[], OutboxPlan]
    ) -> None:
        self.store = store
        self.flows = store.workflows()
        self.signer = signer
        self.clock = clock
        self.plan = plan
        """The alert routes events go to (read at each event: the daemon's current plan)."""
        self.recovery = Recovery(store)
        self.steps = StepWrites(store, clock, plan, self.view)
        """Begin and complete, many concurrent ones committed in one transaction."""

    # -- reads ---------------------------------------------------------------------------

    def record(self, owner: str, workflow_id: str) -> WorkflowRecord:
        """``owner``'s workflow; 404 for an unknown id or another caller's."""
        rec = self.flows.get(workflow_id, owner)
        if rec is None:
            raise not_found(workflow_id)
        return rec

    def view(
        self, rec: WorkflowRecord, resolved: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """What the API shows of a workflow, with its in-flight steps resolved now (or as
        ``resolved`` says: a takeover's own resolution, made a moment before)."""
        idempotent = set(rec.idempotent_steps)
        if resolved is None:
            resolved = self.recovery.resolve(rec.steps, idempotent, rec.owner)
        return {
            "workflow_id": rec.workflow_id,
            "reference": rec.reference,
            "holder": rec.holder,
            "fencing_token": rec.token,
            "lease_expires_at": rec.lease_expires_at,
            "lease_state": lease_state(rec, self.clock()),
            "steps": rec.steps,
            "idempotent_steps": rec.idempotent_steps,
            "in_flight": [
                {
                    "step": s["name"],
                    "operation": s["operation"],
                    "recovery": s["recovery"],
                    "tracked": tracked(s, idempotent),
                    "predicate": how_learned(s, idempotent),
                }
                for s in rec.steps
                if s["state"] == steps.IN_FLIGHT
            ],
            "recovery": resolved,
            "verdict": rec.handoff.get("verdict"),
            "receipts": rec.handoff.get("receipts", {}),
            "created_at": rec.created_at,
            "updated_at": rec.updated_at,
        }

    def page(self, owner: str, after_seq: int, limit: int) -> dict[str, Any]:
        """A page of ``owner``'s workflows (oldest first) and the next page's cursor."""
        records = self.flows.page(owner, after_seq, limit)
        last = records[-1].seq if len(records) == limit else None
        return {
            "items": [self.view(r) for r in records],
            "next_cursor": None if last is None else str(last),
        }

    # -- writes --------------------------------------------------------------------------

    def create(
        self,
        owner: str,
        names: list[str],
        holder: str,
        lease_s: float,
        idempotent: list[str],
        reference: str | None,
    ) -> tuple[dict[str, Any], bool]:
        """A new workflow held by ``holder`` under token 1 (its four receipts signed); the
        same ``reference`` of the same caller again: that workflow, unless it differs."""
        now = self.clock()
        lease_ms = max(1, round(lease_s * 1000))
        workflow_id = WORKFLOW_ID_PREFIX + secrets.token_hex(12)
        first = steps.new_steps(names)
        digest = steps.steps_digest(first)
        facts = Facts(workflow_id, reference, first, idempotent, digest, [])
        change = LockChange(None, None, None, holder, 1, now, now + lease_ms, "first")
        values = {
            "workflow_id": workflow_id,
            "owner": owner,
            "reference": reference,
            "holder": holder,
            "token": 1,
            "acquired_at": now,
            "lease_expires_at": now + lease_ms,
            "lease_ms": lease_ms,
            "expiry_noted": False,
            "steps": first,
            "idempotent_steps": idempotent,
            "checkpoint_digest": digest,
            "handoff": lock.record(facts, change, now, self.signer),
            "created_at": now,
            "updated_at": now,
        }
        rec, created = self.flows.create(values)
        if not created:
            _same_request(rec, names, holder, idempotent)
        return {**self.view(rec), "lock": _lock_of(rec)}, created

    def renew(self, owner: str, workflow_id: str, token: int) -> dict[str, Any]:
        """Extend the lease by its length from now (only under the current token)."""
        with self._fenced(owner, workflow_id, token) as (txn, rec):
            txn.update(lease_expires_at=self.clock() + rec.lease_ms, expiry_noted=False)
        rec = self.record(owner, workflow_id)
        return {**self.view(rec), "lock": _lock_of(rec)}

    def release(self, owner: str, workflow_id: str, token: int) -> dict[str, Any]:
        """Give the lease up now: a successor may take over at once; this token writes no
        more."""
        with self._fenced(owner, workflow_id, token) as (txn, _rec):
            txn.update(lease_expires_at=0)
        return self.view(self.record(owner, workflow_id))

    def take_over(
        self, owner: str, workflow_id: str, holder: str, lease_s: float
    ) -> dict[str, Any]:
        """Take the lock of a workflow whose lease was released or lapsed: a new fencing
        token, the guard's verdict, recovery of every in-flight step and the four receipts.
        While the lease is live: 409 ``LOCK_NOT_HELD`` naming the holder, nothing changed."""
        now = self.clock()
        lease_ms = max(1, round(lease_s * 1000))
        with self.flows.locked(workflow_id, owner, now) as txn:
            rec = txn.record
            if rec is None:
                raise not_found(workflow_id)
            if rec.lease_expires_at > now:
                raise self._lock_not_held(rec)
            reason = "released" if rec.lease_expires_at == 0 else "expired"
            if reason == "expired" and not rec.expiry_noted:
                self._event(txn, rec, steps.LEASE_EXPIRED, "warning", _lapse(rec))
            resolved = self.recovery.resolve(rec.steps, set(rec.idempotent_steps), owner)
            facts = _facts(rec, resolved)
            change = LockChange(
                rec.holder,
                rec.token,
                rec.lease_expires_at,
                holder,
                rec.token + 1,
                now,
                now + lease_ms,
                reason,
            )
            handoff = lock.record(facts, change, now, self.signer)
            taken = _taken(change, lease_ms, handoff)
            txn.update(**taken)
            payload = {
                "holder": holder,
                "from_holder": rec.holder,
                "from_token": rec.token,
                "to_holder": holder,
                "fencing_token": change.to_token,
                "reason": reason,
                "verdict": handoff["verdict"],
                "in_flight": [r["step"] for r in resolved],
            }
            self._event(txn, rec, steps.TAKEN_OVER, "warning", payload)
        # The row as this takeover stored it, its recovery as resolved for the receipts: no
        # second read (on PostgreSQL each is a round trip, and a takeover is waited for).
        workflow = self.view(replace(rec, **taken, updated_at=now), resolved)
        return {
            "verdict": handoff["verdict"],
            "directive": handoff["directive"],
            "exception_applied": handoff["exception_applied"],
            "fencing_token": change.to_token,
            "workflow": workflow,
            "recovery": resolved,
            "receipts": handoff["receipts"],
        }

    def note_lapses(self) -> int:
        """Record ``workflow_lease_expired`` for each lease that lapsed unnoticed (once per
        lease, whichever instance sees it first); returns how many were recorded."""
        now = self.clock()
        noted = 0
        for workflow_id, owner in self.flows.lapsed(now):
            with self.flows.locked(workflow_id, owner, now) as txn:
                rec = txn.record
                if rec is None or rec.expiry_noted or not 0 < rec.lease_expires_at <= now:
                    continue  # taken over, renewed or noted by another instance meanwhile
                txn.update(expiry_noted=True)
                self._event(txn, rec, steps.LEASE_EXPIRED, "warning", _lapse(rec))
                noted += 1
        return noted

    # -- helpers -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _fenced(
        self, owner: str, workflow_id: str, token: int
    ) -> Iterator[tuple[WorkflowTxn, WorkflowRecord]]:
        """The locked row of ``owner``'s workflow, refused (404, a stale or released token)
        before the body runs; what the body raises rolls everything back."""
        with self.flows.locked(workflow_id, owner, self.clock()) as txn:
            rec = txn.record
            if rec is None:
                raise not_found(workflow_id)
            steps.check_token(workflow_id, token, rec.token, rec.lease_expires_at)
            yield txn, rec

    def _event(
        self,
        txn: WorkflowTxn,
        rec: WorkflowRecord,
        kind: str,
        severity: str,
        payload: dict[str, Any],
    ) -> None:
        workflow_event(txn, rec, kind, severity, payload, self.plan())

    def _lock_not_held(self, rec: WorkflowRecord) -> WorkflowRefused:
        decision = lock.evaluate(_facts(rec, []), lock_held=False)
        return WorkflowRefused(
            409,
            f"holder: workflow {rec.workflow_id} is held by {rec.holder!r} (fencing token "
            f"{rec.token}) until {rec.lease_expires_at}; take over after that or once released",
            ["holder"],
            verdict=decision.verdict.value,
            directive=decision.directive,
            holder=rec.holder,
            fencing_token=rec.token,
            lease_expires_at=rec.lease_expires_at,
        )


def _facts(rec: WorkflowRecord, resolved: list[dict[str, Any]]) -> Facts:
    return Facts(
        rec.workflow_id,
        rec.reference,
        rec.steps,
        rec.idempotent_steps,
        rec.checkpoint_digest,
        resolved,
    )


def _taken(change: LockChange, lease_ms: int, handoff: dict[str, Any]) -> dict[str, Any]:
    """The columns a takeover stores: the new holder's lock and the handoff's record."""
    return {
        "holder": change.to_holder,
        "token": change.to_token,
        "acquired_at": change.acquired_at,
        "lease_expires_at": change.expires_at,
        "lease_ms": lease_ms,
        "expiry_noted": False,
        "handoff": handoff,
    }


def _lapse(rec: WorkflowRecord) -> dict[str, Any]:
    return {
        "lease_expires_at": rec.lease_expires_at,
        "in_flight": [s["name"] for s in rec.steps if s["state"] == steps.IN_FLIGHT],
    }


def _lock_of(rec: WorkflowRecord) -> dict[str, Any]:
    return {
        "holder": rec.holder,
        "fencing_token": rec.token,
        "acquired_at": rec.acquired_at,
        "lease_expires_at": rec.lease_expires_at,
    }


def _same_request(rec: WorkflowRecord, names: list[str], holder: str, idem: list[str]) -> None:
    """A repeat of a creation under the same reference must be the same request."""
    for field, stored, given in (
        ("steps", [s["name"] for s in rec.steps], names),
        ("idempotent_steps", sorted(rec.idempotent_steps), sorted(idem)),
        ("holder", rec.holder, holder),
    ):
        if stored != given:
            raise WorkflowRefused(
                409,
                f"{field}: reference {rec.reference!r} names workflow {rec.workflow_id} "
                f"whose {field} is {stored!r}, not {given!r}",
                ["reference", field],
                workflow_id=rec.workflow_id,
            )
