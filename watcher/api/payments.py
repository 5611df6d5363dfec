"""Payments to an address over HTTP: registering one, and its view.

``POST /v1/settlements`` with ``kind: "evm_payment"`` (:class:`PaymentRequest`) registers a
payment: checked against its chain (known, confirmations below the header window, timeout
capped at the max wait, dependent state), stored with no call to the node (transfers count
in blocks above the head recorded at that instant). Without ``reference`` every
registration is a new payment (201); with one, a repeat answers the same payment (200) and
a different payment under the same reference, or the same one with other terms
(confirmations, timeout, dependent state, commit URL), is a 409 naming the fields that
differ.

The view is a settlement view (verdict, directive, deadline, receipt, binding, dependent
state...) with ``tx_hash`` null and the payment's own keys: ``kind``, ``to``, ``asset``,
``amount``, ``from``, ``reference``, ``transfers`` (each with its ``confirmations`` at the
recorded head), ``paid``, ``remaining`` and ``overpaid`` (decimal strings, over the transfers
now counted, final or not).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from guard.payment import ADDRESS_KINDS, DEPOSIT_KIND, PaymentSpec
from guard.settlement import Verdict
from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError, validation_body
from watcher.api.models.payments import PaymentRequest
from watcher.api.registration import checked_chain_terms, same_terms
from watcher.api.views import head_of, view_parts
from watcher.engine.payment_registration import PaymentRegistration, new_payment
from watcher.settlements import depth_of, settlement_view
from watcher.store import NewSettlement, SettlementRecord
from watcher.store.payment_records import NewPaymentSpec
from watcher.store.payments_store import PaymentConflict

__all__ = ["PaymentRequest", "checked_payment", "payment_view", "register_payment_settlement"]


def parsed_payment(payload: dict[str, Any]) -> PaymentRequest:
    """The body as a :class:`PaymentRequest`; a 422 :class:`ApiError` naming each field."""
    try:
        return PaymentRequest.model_validate(payload)
    except ValidationError as exc:
        answer = validation_body(exc.errors(include_url=False))
        raise ApiError(422, answer["error"], fields=answer["fields"]) from None


def checked_payment(
    deps: ApiDeps, body: PaymentRequest, owner: str
) -> tuple[NewSettlement, NewPaymentSpec]:
    """The rows a valid payment registration stores (``owner``'s); :class:`ApiError`."""
    terms = checked_chain_terms(
        deps, body.chain, body.confirmations, body.timeout_s, body.dependent_state, body.commit_url
    )
    reg = PaymentRegistration(
        chain=terms.chain,
        spec=PaymentSpec(body.to, body.asset, int(body.amount), body.sender),
        confirmations=body.confirmations,
        timeout_s=terms.timeout_s,
        dependent_state=body.dependent_state,
        commit_url=body.commit_url,
        reference=body.reference,
        owner=owner,
    )
    return new_payment(reg, deps.clock(), head_of(deps, terms.chain.name))


def register_payment_settlement(
    deps: ApiDeps, payload: dict[str, Any], owner: str
) -> tuple[dict[str, Any], int]:
    """Validate and store a payment; (view, 201 registered / 200 the same reference)."""
    new, spec = checked_payment(deps, parsed_payment(payload), owner)
    try:
        rec, created = deps.store.register_payment(new, spec)
    except PaymentConflict as exc:
        raise ApiError(409, str(exc), fields=["reference", exc.field]) from None
    if not created:
        same_terms(rec, new)
    view = payment_view(deps, rec)
    assert view is not None
    return view, 201 if created else 200


def payment_view(deps: ApiDeps, rec: SettlementRecord) -> dict[str, Any] | None:
    """The view of a payment or a deposit (None for any other settlement)."""
    if rec.kind not in ADDRESS_KINDS:
        return None
    head = head_of(deps, rec.chain)
    spec = deps.store.payment_spec(rec.settlement_id)
    transfers = deps.store.payment_transfers(rec.settlement_id)
    paid = sum(int(t.value) for t in transfers)
    amount = int(spec.amount)
    view = settlement_view(rec, head, **view_parts(deps, rec), now=deps.clock())
    view.update(
        tx_hash=None,
        status=None,
        replaced_by=None,
        kind=rec.kind,
        to=spec.to_address,
        asset=spec.asset,
        amount=spec.amount,
        reference=spec.reference,
        transfers=[
            {
                "tx_hash": t.tx_hash,
                "block_number": t.block_number,
                "block_hash": t.block_hash,
                "log_index": t.log_index,
                "from": t.sender,
                "value": t.value,
                "confirmations": depth_of(t.block_number, head),
            }
            for t in transfers
        ],
        paid=str(paid),
        remaining=str(max(0, amount - paid)),
        overpaid=str(max(0, paid - amount)),
        counted_after_block=spec.after_block,
        waiting_for=(
            f"transfers to {spec.to_address} adding up to {spec.amount}, each final by the "
            f"{rec.finality_mode} rule (N={rec.required_confirmations}); paid {paid}"
            if rec.verdict == Verdict.AWAITING_FINALITY
            else None
        ),
    )
    view["from"] = spec.sender
    if rec.kind == DEPOSIT_KIND:
        deposit = deps.store.deposit(rec.settlement_id)
        counted = transfers[0] if transfers else None
        view.update(
            subscription_id=deposit.subscription_id,
            address=deposit.address,
            tx_hash=deposit.tx_hash,
            log_index=None if counted is None else counted.log_index,
            reorged_out=counted is None,
        )
    return view
