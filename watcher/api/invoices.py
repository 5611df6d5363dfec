"""``/v1/invoices``: invoices paid at fresh addresses derived from ``[payments] xpub``.

``POST`` derives the next unused address and registers its payment (no call to the node);
the view is the invoice's own keys beside its payment's verdict, transfers and sums
(docs/invoices.md). ``POST /v1/invoices/{id}/accept`` takes a late payment (state
``paid_late``): the invoice is then ``settled``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from watcher.api.auth import Reader, Registrar
from watcher.api.cursors import CursorParam, cursor_seq
from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError
from watcher.api.models.deposits import InvoiceRequest
from watcher.api.models.errors import ERRORS
from watcher.api.models.params import DIGITS_ONLY
from watcher.api.models.settlements import MAX_PAGE
from watcher.api.payments import payment_view
from watcher.api.registration import check_delivery
from watcher.api.views import chain_or_error, head_of
from watcher.delivery.plan import OutboxPlan
from watcher.engine.invoice_issuing import InvoicesOff, InvoiceTerms, issue_invoice
from watcher.engine.invoice_states import record_invoice_state
from watcher.store.invoices_store import InvoiceNotFound, InvoiceRecord

_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: ERRORS[404]}


def router(deps: ApiDeps) -> APIRouter:
    """The invoice routes over ``deps``."""
    api = APIRouter()

    @api.post("/v1/invoices", status_code=201, responses={409: ERRORS[409], 422: ERRORS[422]})
    def create_invoice(caller: Registrar, body: InvoiceRequest) -> dict[str, Any]:
        """A new invoice at a fresh address (201), with its EIP-681 ``payment_uri``."""
        return invoice_view(deps, _issue(deps, body, caller.name))

    @api.get("/v1/invoices")
    def list_invoices(
        caller: Reader,
        cursor: CursorParam = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE), DIGITS_ONLY] = 100,
    ) -> dict[str, Any]:
        """The caller's invoices, oldest first, a page at a time."""
        page = deps.store.invoices(caller.name, cursor_seq(cursor), limit)
        last = page[-1][0] if len(page) == limit else None
        return {
            "items": [invoice_view(deps, invoice) for _, invoice in page],
            "next_cursor": None if last is None else str(last),
        }

    @api.get("/v1/invoices/{invoice_id}", responses=_NOT_FOUND)
    def get_invoice(caller: Reader, invoice_id: str) -> dict[str, Any]:
        """One of the caller's invoices."""
        return invoice_view(deps, _owned(deps, invoice_id, caller.name))

    @api.post("/v1/invoices/{invoice_id}/accept", responses={**_NOT_FOUND, 409: ERRORS[409]})
    def accept_invoice(caller: Registrar, invoice_id: str) -> dict[str, Any]:
        """Accept a late payment (state ``paid_late``): the invoice becomes ``settled``."""
        invoice = _owned(deps, invoice_id, caller.name)
        if invoice.state == "settled" and invoice.accepted:
            return invoice_view(deps, invoice)
        if invoice.state != "paid_late":
            raise ApiError(
                409,
                f"state: only a paid_late invoice can be accepted; {invoice_id} is {invoice.state}",
                fields=["state"],
            )
        _accept(deps, invoice)
        return invoice_view(deps, deps.store.invoice(invoice_id))

    return api


def _issue(deps: ApiDeps, body: InvoiceRequest, owner: str) -> InvoiceRecord:
    """Check the request, derive a fresh address and store the invoice."""
    chain = chain_or_error(deps, body.chain, 422)
    check_delivery(deps, body.dependent_state, body.commit_url)
    expires = min(body.expires_in_s, chain.max_wait_s)
    terms = InvoiceTerms(
        chain,
        body.asset,
        int(body.amount),
        expires,
        body.reference,
        body.dependent_state,
        body.commit_url,
    )
    try:
        invoice = issue_invoice(
            deps.store,
            deps.config.payments,
            terms,
            owner,
            deps.clock(),
            head_of(deps, chain.name),
        )
    except InvoicesOff as exc:
        raise ApiError(409, str(exc)) from None
    return invoice


def _accept(deps: ApiDeps, invoice: InvoiceRecord) -> None:
    """Record the operator's acceptance: ``settled``, and its event (with its alerts)."""
    rec = deps.store.settlement(invoice.settlement_id)
    plan = deps.plan if rec.chain in deps.board.all() else OutboxPlan()
    paid = sum(int(t.value) for t in deps.store.payment_transfers(rec.settlement_id))
    with deps.store.block_txn(rec.chain, deps.clock()) as txn:
        record_invoice_state(txn, plan, invoice, "settled", paid, accepted=True)


def _owned(deps: ApiDeps, invoice_id: str, owner: str) -> InvoiceRecord:
    try:
        return deps.store.invoice(invoice_id, owner)
    except InvoiceNotFound:
        raise ApiError(404, f"invoice_id: no invoice {invoice_id}", fields=["invoice_id"]) from None


def invoice_view(deps: ApiDeps, invoice: InvoiceRecord) -> dict[str, Any]:
    """The invoice's keys beside its payment's view (verdict, transfers, paid, remaining)."""
    rec = deps.store.settlement(invoice.settlement_id)
    payment = payment_view(deps, rec)
    assert payment is not None
    return {
        "invoice_id": invoice.invoice_id,
        "settlement_id": invoice.settlement_id,
        "chain": rec.chain,
        "address": invoice.address,
        "derivation_index": invoice.derivation_index,
        "asset": payment["asset"],
        "amount": payment["amount"],
        "expires_at": invoice.expires_at,
        "payment_uri": invoice.payment_uri,
        "state": invoice.state,
        "accepted": invoice.accepted,
        "verdict": rec.verdict,
        "transfers": payment["transfers"],
        "paid": payment["paid"],
        "remaining": payment["remaining"],
        "reference": payment["reference"],
        "receipt": payment.get("receipt"),
    }
