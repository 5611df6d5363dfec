"""Following an invoice's state as its payment is decided (inside the block's transaction).

After a payment's decision is stored, its invoice (if it is one) gets the state the guard
gives (:func:`guard.invoice.invoice_state`) over the verdict and what is counted now; a
change is recorded and raises the event ``invoice_<state>`` (``invoice_paid_late`` and
``invoice_invalid`` as warnings, so the alert channels carry them).
"""

from __future__ import annotations

from collections.abc import Sequence

from guard.event_kinds import invoice_event
from guard.invoice import invoice_state
from guard.settlement import Verdict
from watcher.delivery.plan import OutboxPlan
from watcher.engine.decisions import record_event
from watcher.store.block_txn import BlockTxn
from watcher.store.invoices_store import InvoiceRecord, invoice_of, set_invoice_state
from watcher.store.payment_records import TransferRecord

_WARNING = frozenset({"paid_late", "invalid", "expired", "paid_partial"})


def follow_invoice(
    txn: BlockTxn,
    plan: OutboxPlan,
    settlement_id: str,
    verdict: Verdict,
    amount: int,
    transfers: Sequence[TransferRecord],
) -> str | None:
    """Record the invoice's new state, if the payment is an invoice's and it changed;
    returns the state now (None: not an invoice)."""
    invoice = invoice_of(txn, settlement_id)
    if invoice is None:
        return None
    paid = sum(int(t.value) for t in transfers)
    state = invoice_state(invoice.state, verdict, amount, paid, invoice.accepted)
    if state != invoice.state:
        record_invoice_state(txn, plan, invoice, state, paid)
    return state


def record_invoice_state(
    txn: BlockTxn,
    plan: OutboxPlan,
    invoice: InvoiceRecord,
    state: str,
    paid: int,
    accepted: bool | None = None,
) -> None:
    """Store ``state`` (``accepted``: the operator took a late payment) and its event."""
    set_invoice_state(txn, invoice.invoice_id, state, accepted)
    payload = {
        "invoice_id": invoice.invoice_id,
        "settlement_id": invoice.settlement_id,
        "address": invoice.address,
        "state": state,
        "previous": invoice.state,
        "paid": str(paid),
    }
    severity = "warning" if state in _WARNING else "info"
    record_event(txn, plan, invoice_event(state), severity, payload, invoice.settlement_id)
