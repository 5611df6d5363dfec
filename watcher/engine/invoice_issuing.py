"""Issuing an invoice: the next unused index of the configured key, its address, its rows.

The index is the lowest above every one stored for the key (:mod:`watcher.store.
invoices_store`); the insert of (key, index) is unique, so an instance that lost a race to
another derives the next index and tries again. An index BIP-32 says to skip (an invalid
child, about 1 in 2**127) is stored as used by no one: it is simply passed over.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from typing import Any

from guard.invoice import payment_uri
from guard.payment import PaymentSpec
from watcher.config.chains import ChainConfig
from watcher.config.sections import PaymentsConfig
from watcher.engine.payment_registration import PaymentRegistration, new_payment
from watcher.invoices.xpub import (
    ExtendedKeyError,
    derive_address,
    key_id,
    parse_extended_public_key,
    parse_template,
)
from watcher.store.invoices_store import InvoiceIndexTaken, InvoiceRecord
from watcher.store.store import Store

ATTEMPTS = 20
"""How many indexes one request may lose to other instances before it gives up."""


class InvoicesOff(Exception):
    """No ``[payments] xpub`` is configured."""


@dataclass(frozen=True)
class InvoiceTerms:
    """What the caller asked for."""

    chain: ChainConfig
    """The chain it is paid on."""
    asset: str
    """``native`` or a token contract."""
    amount: int
    """Base units."""
    expires_in_s: float
    """Seconds until it expires (its payment's timeout)."""
    reference: str | None = None
    """The caller's label."""
    dependent_state: dict[str, Any] | None = None
    """State to commit once settled."""
    commit_url: str | None = None
    """Where the commit goes."""


def issue_invoice(
    store: Store,
    payments: PaymentsConfig,
    terms: InvoiceTerms,
    owner: str,
    now: int,
    head: int | None,
) -> InvoiceRecord:
    """Derive a fresh address and store the invoice with its payment; raises
    :class:`InvoicesOff` without a configured key."""
    if payments.xpub is None:
        raise InvoicesOff("invoices need [payments] xpub in the configuration")
    xpub = parse_extended_public_key(payments.xpub)
    steps = parse_template(payments.derivation)
    kid = key_id(payments.xpub)
    index = store.next_invoice_index(kid)
    for _ in range(ATTEMPTS):
        try:
            address = derive_address(xpub, steps, index)
        except ExtendedKeyError:
            index += 1
            continue
        reg = PaymentRegistration(
            chain=terms.chain,
            spec=PaymentSpec(address, terms.asset, terms.amount),
            timeout_s=terms.expires_in_s,
            dependent_state=terms.dependent_state,
            commit_url=terms.commit_url,
            reference=None,
            owner=owner,
        )
        new, spec = new_payment(reg, now, head)
        spec = replace(spec, reference=terms.reference)
        invoice = InvoiceRecord(
            invoice_id="inv_" + secrets.token_hex(12),
            settlement_id=new.settlement_id,
            owner=owner,
            key_id=kid,
            derivation_index=index,
            address=address,
            expires_at=new.deadline,
            payment_uri=payment_uri(terms.chain.chain_id, address, terms.asset, terms.amount),
            state="new",
            accepted=False,
        )
        try:
            store.create_invoice(invoice, new, spec)
        except InvoiceIndexTaken:
            index = max(index + 1, store.next_invoice_index(kid))
            continue
        return invoice
    raise InvoiceIndexTaken(f"no free derivation index after {ATTEMPTS} attempts")
