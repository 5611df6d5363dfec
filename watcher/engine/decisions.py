"""Storing a decision and what it sets off: the one place chains and sources share.

Once a caller (the chain engine for a block, the source poller for an observation) has
combined the stored decision with a fresh one (:func:`guard.settlement.settle_transition`)
and chosen whether to keep watching, :func:`store_decision` writes, inside the caller's
store transaction: the kept decision; the lifecycle event of a verdict that just became
terminal (``settlement_confirmed`` / ``settlement_failed`` / ``settlement_timed_out``);
``late_finality`` or ``finality_violation`` alerts; and the outbox rows the
:class:`~watcher.delivery.plan.OutboxPlan` makes of them. A crash can never separate a
verdict from the delivery that reports it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from guard.event_kinds import LIFECYCLE_EVENT, EventKind
from guard.settlement import Decision, Transition, TransitionKind, Verdict, decision_as_json
from watcher.delivery.plan import OutboxPlan
from watcher.store import BlockTxn, SettlementRecord

log = logging.getLogger("finality.decisions")


def record_event(
    txn: BlockTxn,
    plan: OutboxPlan,
    kind: str,
    severity: str,
    payload: dict[str, Any],
    settlement_id: str | None = None,
) -> int:
    """Record an event and, in the same transaction, its alert deliveries."""
    event_id = txn.record_event(kind, severity, payload, settlement_id)
    plan.on_event(txn, event_id, kind, severity, payload, settlement_id)
    return event_id


def record_events(
    txn: BlockTxn,
    plan: OutboxPlan,
    events: Sequence[tuple[str, str, dict[str, Any], str | None]],
) -> list[int]:
    """:func:`record_event` for many events ((kind, severity, payload, settlement id) each),
    inserted in one statement; returns their ids in order (none when no alert route could
    refer to them)."""
    if not plan.routes:
        txn.record_events(events, ids=False)
        return []
    ids = txn.record_events(events)
    for event_id, (kind, severity, payload, sid) in zip(ids, events, strict=True):
        plan.on_event(txn, event_id, kind, severity, payload, sid)
    return ids


def store_decision(
    txn: BlockTxn,
    rec: SettlementRecord,
    previous: Decision,
    fresh: Decision,
    transition: Transition,
    watching: bool,
    plan: OutboxPlan,
    subject: dict[str, Any],
    where: str,
    confirmed: tuple[str, dict[str, Any]] | None = None,
) -> bool:
    """Write ``transition``'s decision and its events; True if the verdict became terminal.

    ``subject`` is what alerts say the settlement is (id, tx hash, and for sources the
    source, kind and ref); ``where`` names the chain or source in log lines; ``confirmed``:
    the event (kind, payload) recorded in place of ``settlement_confirmed`` when the verdict
    became ``FINALITY_CONFIRMED`` (a deposit's ``deposit_confirmed``)."""
    kept = transition.decision
    terminal = kept.verdict.terminal
    as_json = decision_as_json(kept)
    txn.save_decision(rec, kept.verdict.value, kept.digest, as_json, watching, terminal)
    sid = rec.settlement_id
    if transition.finality_violation:
        # Recorded before anything the reversal sets off: the violation delivered to the
        # commit_url is keyed by this event's id, and precedes a discard decided with it.
        payload = {**subject, "previous": rec.decision, "now": as_json}
        violation_id = record_event(
            txn, plan, EventKind.FINALITY_VIOLATION, "critical", payload, sid
        )
        log.critical("%s: FINALITY VIOLATION for settlement %s", where, sid)
        plan.on_reversed(txn, rec, violation_id, kept.verdict.value)
    moved = transition.kind in (TransitionKind.ADVANCED, TransitionKind.LATE_FINALITY)
    became_terminal = moved and terminal and not previous.verdict.terminal
    if became_terminal:
        # A timeout decided together with late finality is still a timeout, and gets its
        # lifecycle event before the late-finality alert.
        kind: str = LIFECYCLE_EVENT[kept.verdict]
        severity = "info" if kind == "settlement_confirmed" else "warning"
        payload = as_json
        if confirmed is not None and kept.verdict is Verdict.FINALITY_CONFIRMED:
            kind, payload = confirmed
        event_id = record_event(txn, plan, kind, severity, payload, sid)
        plan.on_verdict(txn, rec, kept.verdict.value, event_id)
    if transition.kind is TransitionKind.LATE_FINALITY:
        # The guard carries finality seen at or after the deadline as ``late_finality`` (a
        # fresh timeout); a fresh FINALITY_CONFIRMED carries it as its evidence.
        late = fresh.late_finality or fresh.evidence
        payload = {
            **subject,
            "finality": late.as_json() if late is not None else None,
            "message": "final after it was treated as failed: reconcile",
        }
        record_event(txn, plan, EventKind.LATE_FINALITY, "critical", payload, sid)
        log.error("%s: settlement %s final after its timeout", where, sid)
    return became_terminal
