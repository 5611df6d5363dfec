"""Deciding one payment at a chain position and storing the outcome.

The guard decides (:func:`guard.payment.decide_payment` over the counted transfers, by the
chain's finality rule); this module combines that with the stored decision
(:func:`guard.settlement.settle_transition`: a confirmed payment whose counted transfer a
reorg removed is reversed, a finality violation) and stores it with its events and outbox
rows (:func:`watcher.engine.decisions.store_decision`), as :mod:`watcher.engine.settle`
does for a tx. A decision whose verdict and payment (what was paid, finally or not, by
which transfers) did not change writes nothing, so a watched payment costs no write per
block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from guard.deposit import decide_deposit, lost_transfer
from guard.event_kinds import LIFECYCLE_EVENT, EventKind
from guard.late_watch import still_watched
from guard.payment import DEPOSIT_KIND, decide_payment
from guard.settlement import (
    Decision,
    Settlement,
    TransitionKind,
    Verdict,
    decision_as_json,
    decision_from_json,
    settle_transition,
)
from guard.types import SettlementId, UnixMillis
from watcher.engine.decisions import store_decision
from watcher.engine.deposits_final import Outcome, confirmed_deposits
from watcher.engine.invoice_states import follow_invoice
from watcher.engine.observe import ChainPosition
from watcher.engine.payment_terms import rule_position, spec_of, transfer_of
from watcher.engine.settle import UNCHANGED, Decided, Rules, gate_hold
from watcher.store.block_txn import BlockTxn
from watcher.store.deposits_store import subscriptions_of
from watcher.store.payment_records import PaymentSpecRecord, TransferRecord
from watcher.store.records import SettlementRecord
from watcher.store.refs import SettlementRef


def decide_payment_settlement(
    txn: BlockTxn,
    rec: SettlementRecord,
    spec: PaymentSpecRecord,
    transfers: list[TransferRecord],
    pos: ChainPosition,
    now: int,
    rules: Rules,
    reversed_: bool = False,
) -> Decided:
    """Evaluate the payment ``rec`` at ``pos`` and store the outcome (``reversed_``: a reorg
    removed a transfer its confirmation counted)."""
    outcome = _evaluate(rec, spec, transfers, pos, now, rules, reversed_)
    if outcome is None:
        return UNCHANGED
    _store_one(txn, outcome, rules)
    return Decided(True)


def decide_payment_settlements(
    txn: BlockTxn,
    due: Sequence[tuple[SettlementRecord, PaymentSpecRecord, list[TransferRecord], bool]],
    pos: ChainPosition,
    now: int,
    rules: Rules,
    subscriptions: Mapping[str, str] | None = None,
    confirmed: Sequence[Outcome] = (),
) -> list[Decided]:
    """:func:`decide_payment_settlement` for each of ``due`` ((record, spec, transfers,
    reversed) each), in order. The deposits that simply move on (seen to final, waiting to
    failed: no violation, no late finality) are written together: their decisions in one
    statement, their events in another (a block finalizing 1,000 deposits made 3,000
    statements); any other change goes the one-by-one way. ``subscriptions``: the
    subscription of each due deposit, as read with its spec (those missing are read).
    ``confirmed``: deposits already decided final
    (:func:`~watcher.engine.deposits_final.ripe_outcomes`), written with the
    others that move on, in registration order; one more decision each in the result."""
    out: list[Decided] = [Decided(True) for _ in confirmed]
    plain: list[Outcome] = list(confirmed)
    ripe = confirmed_deposits(due, pos, now, rules)
    for at, (rec, spec, transfers, reversed_) in enumerate(due):
        outcome = ripe.get(at) or _evaluate(rec, spec, transfers, pos, now, rules, reversed_)
        if outcome is None:
            out.append(UNCHANGED)
            continue
        out.append(Decided(True))
        if (
            rec.kind == DEPOSIT_KIND
            and not outcome.transition.finality_violation
            and outcome.transition.kind is not TransitionKind.LATE_FINALITY
        ):
            plain.append(outcome)
        else:
            _store_one(txn, outcome, rules)
    if confirmed:
        plain.sort(key=lambda o: o.rec.seq)
    _store_plain_deposits(txn, plain, rules, subscriptions or {})
    return out


def _evaluate(
    rec: SettlementRecord,
    spec: PaymentSpecRecord,
    transfers: list[TransferRecord],
    pos: ChainPosition,
    now: int,
    rules: Rules,
    reversed_: bool,
) -> Outcome | None:
    """The fresh decision and how it relates to the stored one; None when nothing is to be
    written (same verdict, watching and payment)."""
    settlement = Settlement(
        SettlementId(rec.settlement_id), True, UnixMillis(rec.initiated_at), rec.timeout_ms
    )
    counted = [transfer_of(t) for t in transfers]
    previous = decision_from_json(rec.decision)
    args = (rec.chain, spec_of(spec), counted, rule_position(rec, pos), rules.policy, now)
    if rec.kind == DEPOSIT_KIND:
        reorg = rules.reversal.evidence if rules.reversal is not None else None
        lost = None if counted else lost_transfer(rec.settlement_id, previous, reorg)
        fresh = decide_deposit(settlement, *args, gate_hold(rec, rules), lost)
    else:
        fresh = decide_payment(settlement, *args, gate_hold(rec, rules))
    transition = settle_transition(previous, fresh, rules.reversal if reversed_ else None)
    watching = still_watched(transition, rec.deadline, rules.late_watch_ms, now)
    same = watching == rec.watching
    if transition.kind is TransitionKind.UNCHANGED and same and _paid(fresh) == _paid(previous):
        return None
    if transition.kind is TransitionKind.HELD and same:
        return None
    return Outcome(rec, spec, transfers, previous, fresh, transition, watching)


def _subject(rec: SettlementRecord, spec: PaymentSpecRecord) -> dict[str, Any]:
    """What alerts and events say the payment is."""
    return {
        "settlement_id": rec.settlement_id,
        "kind": rec.kind,
        "to": spec.to_address,
        "asset": spec.asset,
        "amount": spec.amount,
    }


def _store_one(txn: BlockTxn, o: Outcome, rules: Rules) -> None:
    """Store one outcome with its events (the shared decision path) and its kind's own: a
    deposit that became final records ``deposit_confirmed`` in place of the lifecycle
    event."""
    rec, spec, transfers = o.rec, o.spec, list(o.transfers)
    assert isinstance(rec, SettlementRecord), "decided alone from its whole record"
    kept = o.transition.decision
    subject = _subject(rec, spec)
    where = f"chain {rules.chain}"
    args = (o.previous, o.fresh, o.transition, o.watching, rules.plan, subject, where)
    confirmed = None
    if rec.kind == DEPOSIT_KIND and kept.verdict is Verdict.FINALITY_CONFIRMED:
        subs = subscriptions_of(txn, [rec.settlement_id])
        confirmed = (EventKind.DEPOSIT_CONFIRMED, _confirmed(o, subs))
    store_decision(txn, rec, *args, confirmed=confirmed)
    if rec.kind != DEPOSIT_KIND:
        follow_invoice(
            txn, rules.plan, rec.settlement_id, kept.verdict, int(spec.amount), transfers
        )


def _confirmed(o: Outcome, subscriptions: Mapping[str, str]) -> dict[str, Any]:
    """What ``deposit_confirmed`` says: the deposit (its subscription, address, asset,
    amount, sender, tx, log and block) and the decision's verdict and digest."""
    kept, spec = o.transition.decision, o.spec
    sid = o.rec.settlement_id
    payload: dict[str, Any] = {
        "settlement_id": sid,
        "subscription_id": subscriptions.get(sid),
        "address": spec.to_address,
        "asset": spec.asset,
        "amount": spec.amount,
        "from": spec.sender,
    }
    if o.transfers:
        t = o.transfers[-1]
        payload.update(
            tx_hash=t.tx_hash,
            log_index=t.log_index,
            block_number=t.block_number,
            block_hash=t.block_hash,
        )
    payload.update(verdict=kept.verdict.value, digest=kept.digest)
    return payload


def _store_plain_deposits(
    txn: BlockTxn, plain: Sequence[Outcome], rules: Rules, known: Mapping[str, str]
) -> None:
    """Store deposits' outcomes that set off no alert of their own (see
    :func:`decide_payment_settlements`), as :func:`store_decision` would, in two
    statements: the decisions, then the events (``deposit_confirmed`` for a deposit that
    became final, the lifecycle event of one that failed), each event's deliveries in
    order. ``known``: subscriptions already read, by deposit (the others are read)."""
    if not plain:
        return
    missing = [o.rec.settlement_id for o in plain if o.rec.settlement_id not in known]
    subs = {**known, **subscriptions_of(txn, missing)} if missing else known
    rows = []
    events: list[tuple[str, str, dict[str, Any], str | None]] = []
    lifecycle: dict[int, tuple[SettlementRef, str]] = {}  # event position → its verdict
    for o in plain:
        kept = o.transition.decision
        terminal = kept.verdict.terminal
        as_json = decision_as_json(kept)
        rows.append((o.rec, kept.verdict.value, kept.digest, as_json, o.watching, terminal))
        moved = o.transition.kind is TransitionKind.ADVANCED
        if not (moved and terminal and not o.previous.verdict.terminal):
            continue
        sid = o.rec.settlement_id
        lifecycle[len(events)] = (o.rec, kept.verdict.value)
        if kept.verdict is Verdict.FINALITY_CONFIRMED:
            events.append((EventKind.DEPOSIT_CONFIRMED, "info", _confirmed(o, subs), sid))
        else:
            events.append((LIFECYCLE_EVENT[kept.verdict], "warning", as_json, sid))
    txn.save_decisions(rows)
    wanted = bool(rules.plan.routes) or any(rec.commit_url for rec, _ in lifecycle.values())
    if not wanted:  # no alert route and no commit_url: nothing refers to the events' ids
        txn.record_events(events, ids=False)
        return
    ids = txn.record_events(events)
    for at, (event_id, event) in enumerate(zip(ids, events, strict=True)):
        rules.plan.on_event(txn, event_id, *event)
        if at in lifecycle:
            rec, verdict = lifecycle[at]
            rules.plan.on_verdict(txn, rec, verdict, event_id)


def _paid(decision: Decision) -> tuple[object, ...]:
    """What a decision says was paid: the sums and the transfers counted (not their
    growing depth)."""
    evidence = decision.evidence
    if evidence is None:
        return ()
    facts = dict(evidence.facts)
    transfers = facts.get("transfers")
    keys = (
        tuple((t.get("tx_hash"), t.get("log_index"), t.get("basis")) for t in transfers)
        if isinstance(transfers, list)
        else ()
    )
    return (facts.get("paid"), facts.get("paid_final"), keys, facts.get("reason"))
