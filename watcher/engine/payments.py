"""The payment part of a block transaction: counting transfers to watched addresses.

Inside each block's transaction (:func:`payment_writes`): a reorg deletes the transfers
counted above its common ancestor (a confirmed payment that loses one is re-decided under
the reorg's reversal: a finality violation); the block's transfers (fetched before the
transaction: :mod:`watcher.engine.payments_fetch`) are given to the payments they pay;
every payment that may have changed is decided (:mod:`watcher.engine.payments_settle`).

Several payments watching the same recipient and asset share its transfers in registration
order: a transfer goes, whole, to the oldest that is not fully paid by the transfers counted
so far, or to the oldest of all when every one is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from chains.tracker import Reorg
from guard.event_kinds import EventKind
from guard.payment import DEPOSIT_KIND
from guard.settlement import Evidence, Reversal, Verdict
from guard.types import UnixMillis
from watcher.delivery.plan import OutboxPlan
from watcher.engine.collector import collector_paused
from watcher.engine.decisions import record_event
from watcher.engine.deposits_apply import deposit_payload, deposit_writes
from watcher.engine.deposits_final import Outcome, ripe_outcomes
from watcher.engine.observe import ChainPosition
from watcher.engine.payments_scan import Candidate
from watcher.engine.payments_settle import decide_payment_settlements
from watcher.engine.rules import ChainRules, Tally
from watcher.engine.settle import Rules
from watcher.engine.values import BlockInput
from watcher.store.block_txn import BlockTxn
from watcher.store.deposits_ripe import ripe_deposits
from watcher.store.deposits_store import deposit_specs_and_subscriptions, deposits_in
from watcher.store.payment_records import NewTransfer, PaymentState, TransferRecord
from watcher.store.payments_store import (
    add_transfers,
    drop_transfers_above,
    drop_transfers_in,
    payment_states,
    payments_due,
    specs_in,
    transfers_in,
)


def payment_writes(
    txn: BlockTxn, inp: BlockInput, rules: ChainRules, tally: Tally
) -> list[PaymentState]:
    """Undo a reorg's transfers, count the block's, decide every payment that may have
    changed (the cyclic collector held off: :mod:`watcher.engine.collector`). Returns what
    the payment index follows of them, as now stored."""
    with collector_paused():
        return _payment_writes(txn, inp, rules, tally)


def _payment_writes(
    txn: BlockTxn, inp: BlockInput, rules: ChainRules, tally: Tally
) -> list[PaymentState]:
    touched: set[str] = set()
    reversed_ids: set[str] = set()
    reversal = None
    reorg, block, found = inp.reorg, inp.block, inp.transfers
    if reorg is not None:
        dropped = _drop_reorged(txn, reorg)
        touched = {t.settlement_id for t in dropped}
        reversed_ids = {
            r.settlement_id
            for r in txn.by_ids(sorted(touched))
            if r.verdict == Verdict.FINALITY_CONFIRMED
        }
        reversal = _reversal(reorg, dropped, txn.now)
        _report_reorged(txn, rules.plan, reorg, dropped)
    if block is not None and (found.payments or found.deposits):
        counted = _allocate(txn, found.payments)
        subs = dict(inp.subscriptions)
        seen, fresh = deposit_writes(txn, rules.config, rules.plan, subs, found.deposits)
        add_transfers(txn, block.header.number, counted + seen, fresh)
    pos = inp.position
    ripe = (pos.head_number, pos.finalized_number, pos.safe_number)
    deciding = rules.deciding(inp.approval, reversal)
    confirmed, others = _ripe_confirmed(txn, pos, touched, inp.now, deciding)
    due = {
        r.settlement_id: r
        for r in payments_due(txn, rules.late_watch_ms, *ripe, plain_deposits=False)
    }
    for r in txn.by_ids(sorted((touched | others) - set(due))):
        due[r.settlement_id] = r
    if not due and not confirmed:
        return []
    ids = list(due)
    deposits = [i for i, r in due.items() if r.kind == DEPOSIT_KIND]  # their spec: their row
    specs = specs_in(txn, [i for i, r in due.items() if r.kind != DEPOSIT_KIND])
    deposit_specs, subscriptions = deposit_specs_and_subscriptions(txn.conn, deposits)
    specs.update(deposit_specs)
    subscriptions.update(confirmed.subscriptions)
    transfers = transfers_in(txn, ids)
    items = [(r, specs[i], transfers.get(i, []), i in reversed_ids) for i, r in due.items()]
    outcomes = confirmed.outcomes
    for decided in decide_payment_settlements(
        txn, items, pos, inp.now, deciding, subscriptions, outcomes
    ):
        tally.count(decided)
    # The payment index follows payments only (a deposit is matched by its address's
    # subscription): a block finalizing 1,000 deposits need not read them back.
    return payment_states(txn, [i for i, r in due.items() if r.kind != DEPOSIT_KIND])


@dataclass(frozen=True)
class _Confirmed:
    """Ripe deposits read narrowly and confirmed final (their outcomes) and the
    subscription of each."""

    outcomes: list[Outcome]
    subscriptions: dict[str, str]


def _ripe_confirmed(
    txn: BlockTxn, pos: ChainPosition, touched: set[str], now: int, rules: Rules
) -> tuple[_Confirmed, set[str]]:
    """The deposits awaiting finality before their deadline whose transfer may be final
    at ``pos``, read narrowly (:func:`~watcher.store.deposits_ripe.ripe_deposits`: a block
    making 1,000 deposits final read them whole) and decided; returns those confirmed, and
    the ids of the others, which are read whole and decided the whole way: one a reorg
    touched, one held by a finality gate, one with more than one transfer, one the guard
    does not confirm."""
    waiting = ripe_deposits(txn, pos.head_number, pos.finalized_number, pos.safe_number)
    quick = [d for d in waiting if d.settlement_id not in touched and len(d.transfers) == 1]
    decided = ripe_outcomes(quick, pos, now, rules)
    others = {d.settlement_id for d in waiting if d.settlement_id not in decided}
    subscriptions = {d.settlement_id: d.subscription_id for d in quick}
    return _Confirmed(list(decided.values()), subscriptions), others


def _report_reorged(
    txn: BlockTxn, plan: OutboxPlan, reorg: Reorg, dropped: list[TransferRecord]
) -> None:
    """One ``payment_transfer_reorged`` event (and its alerts) per payment that lost a
    counted transfer: the ``reorg`` event's ``touched`` lists txs only."""
    anc = reorg.common_ancestor
    ids = sorted({t.settlement_id for t in dropped})
    deposits = deposits_in(txn, ids)
    for t in dropped:
        dep = deposits.get(t.settlement_id)
        if dep is not None:
            payload = deposit_payload(dep.subscription_id, dep.address, dep.asset, t)
            payload.update(depth=reorg.depth)
            record_event(
                txn, plan, EventKind.DEPOSIT_REORGED, "warning", payload, dep.settlement_id
            )
    for sid in ids:
        if sid in deposits:
            continue
        removed = [_transfer_json(t) for t in dropped if t.settlement_id == sid]
        payload = {
            "settlement_id": sid,
            "depth": reorg.depth,
            "common_ancestor": {"number": anc.number, "hash": anc.hash},
            "removed": removed,
        }
        record_event(txn, plan, EventKind.PAYMENT_TRANSFER_REORGED, "warning", payload, sid)


def _drop_reorged(txn: BlockTxn, reorg: Reorg) -> list[TransferRecord]:
    """Delete the transfers counted in the blocks the reorg replaced."""
    dropped = drop_transfers_above(txn, reorg.common_ancestor.number)
    if reorg.beyond_window:
        gone = [b.old_hash for b in reorg.replaced if b.number <= reorg.common_ancestor.number]
        dropped += drop_transfers_in(txn, gone)
    return dropped


def _allocate(txn: BlockTxn, found: list[Candidate]) -> list[NewTransfer]:
    """Give each transfer to the oldest of its payments not yet fully paid."""
    ids = sorted({sid for c in found for sid in c.payments})
    specs = specs_in(txn, ids)
    paid = {sid: sum(int(t.value) for t in ts) for sid, ts in transfers_in(txn, ids).items()}
    out: list[NewTransfer] = []
    for cand in found:
        live = [sid for sid in cand.payments if sid in specs]
        if not live:
            continue
        owed = [sid for sid in live if paid.get(sid, 0) < int(specs[sid].amount)]
        chosen = owed[0] if owed else live[0]
        value = int(cand.transfer.value)
        paid[chosen] = paid.get(chosen, 0) + value
        out.append(replace(cand.transfer, settlement_id=chosen))
    return out


def _transfer_json(t: TransferRecord) -> dict[str, object]:
    return {
        "tx_hash": t.tx_hash,
        "block_number": t.block_number,
        "block_hash": t.block_hash,
        "log_index": t.log_index,
        "value": t.value,
    }


def _reversal(reorg: Reorg, dropped: list[TransferRecord], now: int) -> Reversal:
    """The reversal a confirmed payment that lost a transfer is re-decided under."""
    anc = reorg.common_ancestor
    return Reversal(
        reason=f"reorg of depth {reorg.depth} past block {anc.number + 1} removed a counted transfer",
        evidence=Evidence.of(
            "reorg",
            UnixMillis(now),
            depth=reorg.depth,
            common_ancestor={"number": anc.number, "hash": anc.hash},
            removed=[dict(_transfer_json(t), settlement_id=t.settlement_id) for t in dropped],
        ),
    )
