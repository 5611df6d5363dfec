"""Deposits: each transfer seen to a watched address, decided on its own (pure).

A subscription watches addresses for ever; every transfer to one of them (a successful
tx's native value, or an ERC-20 ``Transfer`` log of a listed token) becomes a **deposit**, a
settlement of kind ``evm_deposit``. Its terms are exactly what arrived: the amount, the
asset, the address and the sender, counted from that one transfer, so its finality receipt
is the payment receipt (:mod:`guard.receipt_payment`) proving that transfer offline.

A deposit is identified by (subscription, tx hash, asset, address, ordinal), where the
ordinal numbers a tx's transfers of one asset to one address in log order: a reorg that
includes the tx again (in another block, at another log index) finds the same deposit, so
it is never reported twice. While its transfer is reorged out the deposit waits; past its
timeout it is treated as failed, and the directive says why.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from guard.payment import DEPOSIT_KIND, Transfer
from guard.settlement import Decision, Verdict


def deposit_id(subscription_id: str, tx_hash: str, asset: str, address: str, ordinal: int) -> str:
    """``dep_`` + 24 hex digits of sha256 over the deposit's identity (see the module doc):
    the same transfer seen again (a restart, another instance, a re-inclusion) has the same
    id."""
    key = f"{DEPOSIT_KIND}:{subscription_id}:{tx_hash}:{asset}:{address}:{ordinal}".encode()
    return "dep_" + hashlib.sha256(key).hexdigest()[:24]


def deposit_decision(decision: Decision, transfers: list[Transfer]) -> Decision:
    """A deposit's decision from the payment decision over its one transfer
    (:func:`guard.payment.decide_payment`; none while a reorg has taken it out). A deposit
    that times out with no transfer was reorged out and not included again: its directive
    says so."""
    if decision.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE and not transfers:
        note = (
            " The deposit's transfer was taken out by a reorg and not included again"
            " before its timeout."
        )
        return replace(decision, directive=decision.directive + note)
    return decision
