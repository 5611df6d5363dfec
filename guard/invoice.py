"""Invoices: a payment at a fresh address, in states a shop understands (pure).

An invoice is an ``evm_payment`` settlement (:mod:`guard.payment`) to an address derived for
it alone, so no other payment shares its transfers. Beside the settlement's verdict it has a
``state`` (the vocabulary of BTCPay Server; an exception is the state's value itself):

* ``new``: nothing paid yet; ``paid_partial``: part paid (before the expiry, or at it);
* ``processing``: paid in full, not yet final;
* ``settled``: final (``FINALITY_CONFIRMED``, the payment receipt proves it), or a late
  payment the operator accepted; ``paid_over``: final, more than the amount;
* ``expired``: nothing final by the expiry (``TIMEOUT_TREATED_AS_FAILURE``);
* ``paid_late``: paid in full only after the expiry: the invoice stays expired unless the
  operator accepts it;
* ``invalid``: a settled invoice's transfer was reorged out (a finality violation).

:func:`payment_uri` is the EIP-681 URI a wallet opens to pay it.
"""

from __future__ import annotations

from guard.hexes import checksum_address
from guard.payment import NATIVE
from guard.settlement import Verdict

INVOICE_STATES = (
    "new",
    "paid_partial",
    "processing",
    "settled",
    "paid_over",
    "expired",
    "paid_late",
    "invalid",
)
"""Every value of an invoice's ``state``."""

_FINAL_STATES = frozenset({"settled", "paid_over"})


def invoice_state(
    previous: str, verdict: Verdict, amount: int, paid: int, accepted: bool = False
) -> str:
    """The state of an invoice whose payment has ``verdict`` with ``paid`` base units counted
    now; ``previous`` is the state recorded before (a settled invoice that is no longer
    confirmed was reorged: ``invalid``, until its transfers are final again)."""
    if verdict is Verdict.FINALITY_CONFIRMED:
        return "paid_over" if paid > amount else "settled"
    if previous in _FINAL_STATES or (previous == "invalid" and not accepted):
        return "invalid"
    if verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE:
        if accepted:
            return "settled"
        if paid >= amount:
            return "paid_late"
        return "paid_partial" if paid > 0 else "expired"
    if verdict is Verdict.SETTLEMENT_FAILED:
        return "invalid"
    if paid == 0:
        return "new"
    return "paid_partial" if paid < amount else "processing"


def payment_uri(chain_id: int, address: str, asset: str, amount: int) -> str:
    """The EIP-681 ``ethereum:`` URI of a payment: the native coin as
    ``ethereum:<to>@<chain>?value=<wei>``; a token as a ``transfer`` call on its contract
    (``ethereum:<token>@<chain>/transfer?address=<to>&uint256=<units>``)."""
    to = checksum_address(address)
    if asset == NATIVE:
        return f"ethereum:{to}@{chain_id}?value={amount}"
    return f"ethereum:{checksum_address(asset)}@{chain_id}/transfer?address={to}&uint256={amount}"
