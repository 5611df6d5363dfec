"""Storing a block's deposits, inside its transaction.

Each candidate (:mod:`watcher.engine.deposits_scan`) of an active subscription whose
deposit is not stored yet becomes an ``evm_deposit`` settlement (owned by its
subscription's caller, with its subscription's confirmations and ``commit_url``; its
deadline from the chain's timeout) and records ``deposit_seen``; a deposit already stored
(its tx seen before: a block processed again, a re-inclusion after a reorg, a deleted
subscription's deposit) only gets its transfer counted again. The transfers of every
stored deposit are returned, to be counted with the block's payments (the payment decision
then decides the deposit: seen, final, reorged out).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from guard.payment import DEPOSIT_KIND
from guard.settlement import decision_as_json
from guard.types import SettlementId
from watcher.config.chains import ChainConfig
from watcher.delivery.plan import OutboxPlan
from watcher.engine.decisions import record_events
from watcher.engine.deposits_scan import DepositCandidate
from watcher.settlements import Awaiting, awaiting_row, first_decisions_of
from watcher.store.block_txn import BlockTxn
from watcher.store.deposit_records import SubscriptionRecord
from watcher.store.deposits_store import (
    deposit_row,
    deposit_rows_alike,
    insert_new_deposits,
    known_deposits,
)
from watcher.store.payment_records import NewPaymentSpec, NewTransfer, TransferRecord


def deposit_writes(
    txn: BlockTxn,
    chain: ChainConfig,
    plan: OutboxPlan,
    subscriptions: dict[str, SubscriptionRecord],
    found: Sequence[DepositCandidate],
) -> tuple[list[NewTransfer], set[str]]:
    """Store the new deposits of ``found`` (and their ``deposit_seen`` events); return the
    transfers to count for all of them, and the ids of those stored here (their rows hold
    their block already: :func:`~watcher.store.payments_store.add_transfers`)."""
    if not found:
        return [], set()
    known = known_deposits(txn, [c.deposit.settlement_id for c in found])
    fresh: list[tuple[DepositCandidate, SubscriptionRecord]] = []
    for cand in found:
        dep, sub = cand.deposit, subscriptions.get(cand.deposit.subscription_id)
        if dep.settlement_id in known or sub is None or not sub.active:
            continue  # seen before (counted again), or a deleted subscription's new one
        known.add(dep.settlement_id)
        fresh.append((cand, sub))
    # Registered alike (same instant, the chain's timeout): first decisions made together.
    alike = Awaiting(chain, None, None, None, None)
    ids = [SettlementId(cand.deposit.settlement_id) for cand, _ in fresh]
    firsts = first_decisions_of(alike, ids, txn.now)
    rows = []
    made: dict[str, dict[str, Any]] = {}  # per subscription, its first new deposit's row
    for (cand, sub), sid, first in zip(fresh, ids, firsts, strict=True):
        dep, t = cand.deposit, cand.transfer
        row = made.get(sub.subscription_id)
        if (
            row is None
            or row["verdict"] != first.verdict.value
            or row["transfer_block"] != t.block_number
        ):
            awaiting = Awaiting(chain, sub.confirmations, None, None, sub.commit_url)
            new = awaiting_row(awaiting, sid, sid, sub.owner, txn.now, first, kind=DEPOSIT_KIND)
            row = made[sub.subscription_id] = deposit_row(new, t.block_number)
        else:  # registered alike: only the id and the first decision differ
            (row,) = deposit_rows_alike(row, [(sid, first.digest, decision_as_json(first))])
        spec = NewPaymentSpec(dep.address, dep.asset, t.value, t.sender, t.block_number - 1)
        rows.append((row, spec, dep, t))
    insert_new_deposits(txn, [(row, spec, dep) for row, spec, dep, _ in rows])
    seen = [
        (
            "deposit_seen",
            "info",
            deposit_payload(dep.subscription_id, dep.address, dep.asset, t),
            dep.settlement_id,
        )
        for _new, _spec, dep, t in rows
    ]
    record_events(txn, plan, seen)  # one statement for the block's new deposits
    transfers = [c.transfer for c in found if c.deposit.settlement_id in known]
    return transfers, {dep.settlement_id for _row, _spec, dep, _t in rows}


def deposit_payload(
    subscription_id: str, address: str, asset: str, t: NewTransfer | TransferRecord
) -> dict[str, object]:
    """What a deposit event says: the subscription, the transfer and where it is."""
    return {
        "settlement_id": t.settlement_id,
        "subscription_id": subscription_id,
        "address": address,
        "asset": asset,
        "amount": t.value,
        "from": t.sender,
        "tx_hash": t.tx_hash,
        "log_index": t.log_index,
        "block_number": t.block_number,
        "block_hash": t.block_hash,
    }
