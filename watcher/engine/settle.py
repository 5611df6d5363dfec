"""Deciding one settlement at a chain position and storing the outcome.

The guard decides (``observe.decide`` → ``settle_transition``); this module adds what the
engine knows around it: the finality gate's hold, the reversal a reorg justified, how long
a timed-out settlement stays watched for late finality, and whether anything changed at
all (an unchanged decision writes nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from chains.quorum import GateResult
from guard.late_watch import still_watched
from guard.settlement import (
    Decision,
    Reversal,
    SettlementPolicy,
    TransitionKind,
    Verdict,
    decision_from_json,
    settle_transition,
)
from watcher.delivery.plan import OutboxPlan
from watcher.engine.decisions import store_decision
from watcher.engine.observe import ChainPosition, decide
from watcher.store.block_txn import BlockTxn
from watcher.store.records import SettlementRecord
from watcher.store.refs import SettlementRef


@dataclass(frozen=True)
class Rules:
    """What every decision of one chain is made with (built per transaction, so a change of
    alert routes or gate answer is seen at once)."""

    chain: str
    """The chain's name (in logs and events)."""
    policy: SettlementPolicy
    """The guard's policy (max wait)."""
    late_watch_ms: int
    """How long a timed-out settlement is still watched for late finality."""
    plan: OutboxPlan
    """Which outbox rows a change produces."""
    gated: bool
    """Whether a non-trivial finality gate must approve terminal verdicts."""
    approval: GateResult | None = None
    """The gate's answer asked before this transaction."""
    reversal: Reversal | None = None
    """The reversal a reorg in this transaction justified (for its reversed settlements)."""


@dataclass(frozen=True)
class Decided:
    """What deciding one settlement did."""

    changed: bool
    """Whether anything was stored."""
    confirmed_block: int | None = None
    """The inclusion block of a settlement that just became FINALITY_CONFIRMED."""


UNCHANGED = Decided(False)


def decide_settlement(
    txn: BlockTxn,
    rec: SettlementRecord,
    pos: ChainPosition,
    now: int,
    rules: Rules,
    reversed_: bool = False,
) -> Decided:
    """Evaluate ``rec`` at ``pos`` and store the outcome (``reversed_``: a reorg took its
    confirmed verdict's ground, so it may be withdrawn under ``rules.reversal``)."""
    hold, observed_by = _gate_hold(rec, rules)
    fresh = decide(rec, pos, rules.policy, now, hold, observed_by)
    previous = decision_from_json(rec.decision)
    transition = settle_transition(previous, fresh, rules.reversal if reversed_ else None)
    kept = transition.decision
    watching = still_watched(transition, rec.deadline, rules.late_watch_ms, now)
    if (
        transition.kind is TransitionKind.UNCHANGED
        and watching == rec.watching
        and wait_reason(fresh) == wait_reason(previous)
    ):
        return UNCHANGED  # (a new reason to wait is stored: the settlement view shows it)
    if transition.kind is TransitionKind.HELD and watching == rec.watching:
        return UNCHANGED
    subject = {"settlement_id": rec.settlement_id, "tx_hash": rec.tx_hash}
    became_terminal = store_decision(
        txn, rec, previous, fresh, transition, watching, rules.plan, subject, f"chain {rules.chain}"
    )
    confirmed = became_terminal and kept.verdict is Verdict.FINALITY_CONFIRMED
    return Decided(True, rec.block_number if confirmed else None)


def _gate_hold(rec: SettlementRecord, rules: Rules) -> tuple[str | None, tuple[str, ...]]:
    """Why the gate holds ``rec`` back (None: it does not) and the endpoints it asked."""
    if not rules.gated:
        return None, ()
    return gate_hold(rec, rules), (rules.approval or GateResult(frozenset())).endpoints


def gate_hold(rec: SettlementRef, rules: Rules) -> str | None:
    """Why a non-trivial finality gate holds the settlement back (None: it does not): the
    one answer for a tx, a payment and a deposit."""
    if not rules.gated:
        return None
    approval = rules.approval
    if approval is not None and rec.settlement_id in approval.approved:
        return None
    waiting = approval.waiting if approval is not None else {}
    return waiting.get(rec.settlement_id, "not yet checked against the other endpoints")


def wait_reason(decision: Decision) -> str | None:
    """Why an awaiting decision waits although its block looks final (the quorum gate's
    hold, or a ``finalized`` tag not trusted), else None."""
    evidence = decision.evidence
    if evidence is None:
        return None
    facts = dict(evidence.facts)
    reason = facts.get("reason") if evidence.kind == "awaiting_quorum" else None
    reason = reason or facts.get("waiting")
    return str(reason) if reason is not None else None
