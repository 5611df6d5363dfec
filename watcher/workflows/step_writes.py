"""Begin and complete a step: the writes an agent makes most, committed in groups.

Each write is built here as a function of the group's transaction
(:mod:`watcher.workflows.writer`): lock the workflow's row, refuse (404, a stale or
released token, a step in the wrong state, an unknown settlement) before writing anything,
store the steps and their digest (the checkpoint), record the event and its alert
deliveries. Its answer, the workflow's view, is made after the commit. The API awaits these
writes on its event loop; :meth:`StepWrites.begin` and :meth:`StepWrites.complete` wait for
them from any other thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from watcher.clock import Clock
from watcher.delivery.plan import OutboxPlan
from watcher.store.errors import SettlementNotFound
from watcher.store.store import Store
from watcher.store.workflows_store import WorkflowGroup, WorkflowRecord, WorkflowTxn
from watcher.workflows import steps
from watcher.workflows.steps import WorkflowRefused, not_found
from watcher.workflows.writer import Answer, GroupWriter, Write

PG_LANES = 4
"""Writer threads on PostgreSQL (a group's statements wait on round trips to the server:
four groups in flight, as many as the API's worker threads used to keep; SQLite: one)."""


class StepWrites:
    """Step writes of the API's callers, through one :class:`GroupWriter`."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        plan: Callable[[], OutboxPlan],
        view: Callable[[WorkflowRecord], dict[str, Any]],
    ) -> None:
        self.store = store
        self.clock = clock
        self.plan = plan
        self.view = view
        flows = store.workflows()
        self.writer = GroupWriter(flows, lanes=PG_LANES if flows.side_by_side else 1)
        """Where the writes are committed, many concurrent ones to a transaction."""

    def begin(
        self,
        owner: str,
        workflow_id: str,
        step: str,
        token: int,
        operation: str,
        recovery: dict[str, str] | None,
    ) -> dict[str, Any]:
        """Put ``step`` in flight under ``token``, listed with how its state can be learned."""
        write = self.begin_write(owner, workflow_id, step, token, operation, recovery)
        return self.writer.run(workflow_id, write)

    def complete(
        self,
        owner: str,
        workflow_id: str,
        step: str,
        token: int,
        side_effects: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """Mark ``step`` completed under ``token``; the checkpoint records its side effects."""
        write = self.complete_write(owner, workflow_id, step, token, side_effects)
        return self.writer.run(workflow_id, write)

    def begin_write(
        self,
        owner: str,
        workflow_id: str,
        step: str,
        token: int,
        operation: str,
        recovery: dict[str, str] | None,
    ) -> Write:
        """The write of :meth:`begin` (the API awaits it on its loop)."""

        def write(group: WorkflowGroup) -> Answer:
            if recovery is not None and "settlement_id" in recovery:
                self._check_settlement(recovery["settlement_id"], owner)
            txn, rec = self._fenced(group, owner, workflow_id, token)
            changed = steps.begun(rec.steps, step, operation, recovery, workflow_id)
            stored = _store_steps(txn, rec, changed)
            payload = {"step": step, "operation": operation, "recovery": recovery}
            workflow_event(txn, rec, steps.STEP_BEGUN, "info", payload, self.plan())
            return lambda: self.view(stored)

        return write

    def complete_write(
        self,
        owner: str,
        workflow_id: str,
        step: str,
        token: int,
        side_effects: dict[str, Any] | None,
    ) -> Write:
        """The write of :meth:`complete`."""

        def write(group: WorkflowGroup) -> Answer:
            txn, rec = self._fenced(group, owner, workflow_id, token)
            changed = steps.completed(rec.steps, step, side_effects, workflow_id)
            stored = _store_steps(txn, rec, changed)
            payload = {"step": step, "side_effects": side_effects or {}}
            workflow_event(txn, rec, steps.STEP_COMPLETED, "info", payload, self.plan())
            return lambda: self.view(stored)

        return write

    def _fenced(
        self, group: WorkflowGroup, owner: str, workflow_id: str, token: int
    ) -> tuple[WorkflowTxn, WorkflowRecord]:
        """The locked row of ``owner``'s workflow in ``group``'s transaction, refused (404,
        a stale or released token) before anything is written."""
        txn = group.locked(workflow_id, owner, self.clock())
        rec = txn.record
        if rec is None:
            raise not_found(workflow_id)
        steps.check_token(workflow_id, token, rec.token, rec.lease_expires_at)
        return txn, rec

    def _check_settlement(self, settlement_id: str, owner: str) -> None:
        try:
            self.store.settlement(settlement_id, owner=owner)
        except SettlementNotFound:
            raise WorkflowRefused(
                422,
                f"recovery.settlement_id: no settlement {settlement_id!r} of this caller "
                "(register the transaction first)",
                ["recovery.settlement_id"],
            ) from None


def _store_steps(
    txn: WorkflowTxn, rec: WorkflowRecord, changed: list[dict[str, Any]]
) -> WorkflowRecord:
    """Store the steps and their digest (the checkpoint); the workflow as now stored."""
    digest = steps.steps_digest(changed)
    txn.update(steps=changed, checkpoint_digest=digest)
    return replace(rec, steps=changed, checkpoint_digest=digest, updated_at=txn.now)


def workflow_event(
    txn: WorkflowTxn,
    rec: WorkflowRecord,
    kind: str,
    severity: str,
    payload: dict[str, Any],
    plan: OutboxPlan,
) -> None:
    """Record a workflow's event, and the alert deliveries it calls for, in ``txn``."""
    full = {
        "workflow_id": rec.workflow_id,
        "reference": rec.reference,
        "holder": rec.holder,
        "fencing_token": rec.token,
        **payload,
    }
    event_id = txn.record_event(kind, severity, full)
    plan.on_event(txn.events, event_id, kind, severity, full, rec.workflow_id)
