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

from guard.deposit import decide_deposit, lost_transfer
from guard.payment import DEPOSIT_KIND, PaymentSpec, RulePosition, Transfer, decide_payment
from guard.settlement import (
    Decision,
    Settlement,
    TransitionKind,
    Verdict,
    decision_from_json,
    settle_transition,
)
from guard.types import SettlementId, UnixMillis
from watcher.engine.decisions import record_event, store_decision
from watcher.engine.invoice_states import follow_invoice
from watcher.engine.observe import ChainPosition
from watcher.engine.settle import UNCHANGED, Decided, Rules
from watcher.store.block_txn import BlockTxn
from watcher.store.payment_records import PaymentSpecRecord, TransferRecord
from watcher.store.records import SettlementRecord


def spec_of(rec: PaymentSpecRecord) -> PaymentSpec:
    """The guard's spec of a stored one."""
    return PaymentSpec(rec.to_address, rec.asset, int(rec.amount), rec.sender)


def transfer_of(rec: TransferRecord) -> Transfer:
    """The guard's transfer of a stored one."""
    return Transfer(
        rec.tx_hash,
        rec.block_number,
        rec.block_hash,
        rec.tx_index,
        rec.log_index,
        rec.sender,
        int(rec.value),
    )


def rule_position(rec: SettlementRecord, pos: ChainPosition) -> RulePosition:
    """The chain position under the settlement's own rule and depth."""
    return RulePosition(
        rec.finality_mode,
        rec.required_confirmations,
        pos.head_number,
        pos.head_hash,
        pos.finalized_number,
        pos.safe_number,
    )


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
    settlement = Settlement(
        SettlementId(rec.settlement_id), True, UnixMillis(rec.initiated_at), rec.timeout_ms
    )
    counted = [transfer_of(t) for t in transfers]
    previous = decision_from_json(rec.decision)
    args = (rec.chain, spec_of(spec), counted, rule_position(rec, pos), rules.policy, now)
    if rec.kind == DEPOSIT_KIND:
        reorg = rules.reversal.evidence if rules.reversal is not None else None
        lost = None if counted else lost_transfer(rec.settlement_id, previous, reorg)
        fresh = decide_deposit(settlement, *args, _hold(rec, rules), lost)
    else:
        fresh = decide_payment(settlement, *args, _hold(rec, rules))
    transition = settle_transition(previous, fresh, rules.reversal if reversed_ else None)
    kept = transition.decision
    watching = not kept.verdict.terminal or (
        kept.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
        and transition.kind is not TransitionKind.LATE_FINALITY
        and now < rec.deadline + rules.late_watch_ms
    )
    same = watching == rec.watching
    if transition.kind is TransitionKind.UNCHANGED and same and _paid(fresh) == _paid(previous):
        return UNCHANGED
    if transition.kind is TransitionKind.HELD and same:
        return UNCHANGED
    subject = {
        "settlement_id": rec.settlement_id,
        "kind": rec.kind,
        "to": spec.to_address,
        "asset": spec.asset,
        "amount": spec.amount,
    }
    became_terminal = store_decision(
        txn, rec, previous, fresh, transition, watching, rules.plan, subject, f"chain {rules.chain}"
    )
    if rec.kind == DEPOSIT_KIND and became_terminal and kept.verdict is Verdict.FINALITY_CONFIRMED:
        confirmed = {**subject, "tx_hash": transfers[-1].tx_hash if transfers else None}
        record_event(txn, rules.plan, "deposit_confirmed", "info", confirmed, rec.settlement_id)
    if rec.kind != DEPOSIT_KIND:
        follow_invoice(
            txn, rules.plan, rec.settlement_id, kept.verdict, int(spec.amount), transfers
        )
    return Decided(True)


def _hold(rec: SettlementRecord, rules: Rules) -> str | None:
    """Why a non-trivial finality gate holds the payment back (None: it does not)."""
    if not rules.gated:
        return None
    approval = rules.approval
    if approval is not None and rec.settlement_id in approval.approved:
        return None
    waiting = approval.waiting if approval is not None else {}
    return waiting.get(rec.settlement_id, "not yet checked against the other endpoints")


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
