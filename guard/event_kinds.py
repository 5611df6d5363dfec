"""The kinds of event the daemon records: the one list every writer and reader names.

An event is what the daemon tells its operator and its alert channels about a settlement or a
chain (``GET /v1/events``, ``[[alerts]] events``, the ``events`` table's ``kind``). The values
are the stored and transmitted strings themselves (:class:`EventKind` is a ``StrEnum``), so a
member compares and serialises exactly as the bare string did.

The list lives in guard/ not because guard decides on events (it records none) but because
every layer names them: chains/ raises ``rpc_disagreement`` and ``finality_violation`` from its
quorum gate, the store counts the lifecycle events a receipt follows, watcher/ writes and
routes them all; guard/ is the one place all three may import.
"""

from __future__ import annotations

import enum

from guard.invoice import INVOICE_STATES
from guard.settlement import Verdict


class EventKind(enum.StrEnum):
    """Every kind of event the daemon records."""

    REORG = "reorg"
    """The chain replaced blocks the watcher had seen."""
    FINALITY_VIOLATION = "finality_violation"
    """A confirmed settlement lost its ground (a reorg past its block, a finalized block or tag
    that changed): its finality receipt is revoked."""
    LATE_FINALITY = "late_finality"
    """Finality observed after the settlement had timed out (someone must reconcile)."""
    DECISION_RESTATED = "decision_restated"
    """A stored decision restated on new evidence without changing its verdict."""
    SETTLEMENT_CONFIRMED = "settlement_confirmed"
    """A settlement became ``FINALITY_CONFIRMED``."""
    SETTLEMENT_FAILED = "settlement_failed"
    """A settlement became ``SETTLEMENT_FAILED``."""
    SETTLEMENT_TIMED_OUT = "settlement_timed_out"
    """A settlement became ``TIMEOUT_TREATED_AS_FAILURE``."""
    FAILURE_EVIDENCE_REORGED = "failure_evidence_reorged"
    """The evidence a failure rested on (a reverted or replacing tx) was reorged out."""
    PAYMENT_TRANSFER_REORGED = "payment_transfer_reorged"
    """A transfer counted for a payment was reorged out."""
    RPC_UNHEALTHY = "rpc_unhealthy"
    """An RPC endpoint stopped being usable (circuit open, stalled, wrong chain)."""
    RPC_RECOVERED = "rpc_recovered"
    """An RPC endpoint that was unhealthy is usable again."""
    RPC_DISAGREEMENT = "rpc_disagreement"
    """Endpoints of a quorum answered different blocks at one height."""
    DEPOSIT_SEEN = "deposit_seen"
    """A transfer to a watched deposit address was seen."""
    DEPOSIT_CONFIRMED = "deposit_confirmed"
    """A deposit became final."""
    DEPOSIT_REORGED = "deposit_reorged"
    """A deposit's transfer was reorged out."""
    INVOICE_NEW = "invoice_new"
    """An invoice is back to nothing paid (its transfers were reorged out)."""
    INVOICE_PAID_PARTIAL = "invoice_paid_partial"
    """Part of an invoice is paid."""
    INVOICE_PROCESSING = "invoice_processing"
    """An invoice is paid in full, not final yet."""
    INVOICE_SETTLED = "invoice_settled"
    """An invoice's payment is final (or a late payment was accepted)."""
    INVOICE_PAID_OVER = "invoice_paid_over"
    """An invoice's payment is final and more than its amount."""
    INVOICE_EXPIRED = "invoice_expired"
    """Nothing final by an invoice's expiry."""
    INVOICE_PAID_LATE = "invoice_paid_late"
    """An invoice was paid in full only after its expiry."""
    INVOICE_INVALID = "invoice_invalid"
    """A settled invoice's transfer was reorged out."""
    WORKFLOW_STEP_BEGUN = "workflow_step_begun"
    """A workflow's holder began a step (its effects are in flight)."""
    WORKFLOW_STEP_COMPLETED = "workflow_step_completed"
    """A workflow's holder completed a step."""
    WORKFLOW_TAKEN_OVER = "workflow_taken_over"
    """Another holder took a workflow over."""
    WORKFLOW_LEASE_EXPIRED = "workflow_lease_expired"
    """A workflow holder's lease ran out."""
    TAKEOVER_BLOCKED = "takeover_blocked"
    """A standby cannot take a lapsed lease: the lapsed owner's database sessions hold its
    lock and this instance may not end them (the operator grants ``pg_signal_backend`` or
    ends that process)."""


LIFECYCLE_EVENT = {
    Verdict.FINALITY_CONFIRMED: EventKind.SETTLEMENT_CONFIRMED,
    Verdict.SETTLEMENT_FAILED: EventKind.SETTLEMENT_FAILED,
    Verdict.TIMEOUT_TREATED_AS_FAILURE: EventKind.SETTLEMENT_TIMED_OUT,
}
"""The event a verdict that just became terminal records."""

WORKFLOW_EVENTS = (
    EventKind.WORKFLOW_STEP_BEGUN,
    EventKind.WORKFLOW_STEP_COMPLETED,
    EventKind.WORKFLOW_TAKEN_OVER,
    EventKind.WORKFLOW_LEASE_EXPIRED,
)
"""The events a workflow records."""


def invoice_event(state: str) -> EventKind:
    """The event an invoice that moved to ``state`` records (``invoice_<state>``); a
    ``ValueError`` for a state that is not one of :data:`guard.invoice.INVOICE_STATES`."""
    if state not in INVOICE_STATES:
        raise ValueError(f"no invoice state {state!r}")
    return EventKind(f"invoice_{state}")
