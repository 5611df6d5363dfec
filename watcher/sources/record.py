"""Storing a source settlement's decision: the chain engine's rules, for any source.

:func:`record_observation` is what :meth:`watcher.engine.chain_watcher.ChainWatcher._decide` does for a
block, applied to one :class:`~guard.source.SourceObservation`, inside the caller's store
transaction: evaluate with the guard, combine with the stored decision
(:func:`~guard.settlement.settle_transition`), save it with
``txn.save_decision(... decision_as_json(...))``, and record the same events with the same
payloads (``settlement_confirmed`` / ``settlement_failed`` / ``settlement_timed_out``,
``late_finality``, ``finality_violation``) together with the outbox rows the
:class:`~watcher.delivery.plan.OutboxPlan` makes of them (commit, discard, cancelled commit,
alerts). A crash can never separate the verdict from the delivery that reports it.

One difference, on purpose: the engine stores an unchanged non-terminal verdict only when the
chain moved; a source stores it whenever the *facts* of its evidence changed (a payment went
from processing to succeeded: still awaiting, but the stored evidence is the source's memory,
e.g. when the finality window started, so it must be kept). Re-observing the same facts
stores nothing.
"""

from __future__ import annotations

from typing import Any

from guard.late_watch import still_watched
from guard.settlement import (
    Settlement,
    SettlementPolicy,
    Transition,
    TransitionKind,
    Verdict,
    decision_from_json,
    settle_transition,
)
from guard.source import SourceObservation, evaluate_source, reversal_of, same_evidence
from guard.types import SettlementId, UnixMillis
from watcher.delivery.plan import OutboxPlan
from watcher.engine.decisions import store_decision
from watcher.store import BlockTxn, SettlementRecord


def record_observation(
    txn: BlockTxn,
    rec: SettlementRecord,
    obs: SourceObservation,
    policy: SettlementPolicy,
    late_watch_ms: int,
    plan: OutboxPlan,
    now: int,
    reversal_watch_ms: int = 0,
) -> bool:
    """Decide ``rec`` on ``obs`` at ``now`` and store the outcome in ``txn``.

    A timed-out settlement stays watched for ``late_watch_ms`` past its deadline (late
    finality), as on chains; a confirmed one for ``reversal_watch_ms`` after it became final
    (0: not at all), for sources whose outcome can be taken back later. Returns True when
    anything was written. ``rec`` must have been read in ``txn`` (so the stored decision it
    combines with is the current one)."""
    settlement = Settlement(
        settlement_id=SettlementId(rec.settlement_id),
        initiated=True,
        initiated_at=UnixMillis(rec.initiated_at),
        timeout_ms=rec.timeout_ms,
    )
    fresh = evaluate_source(settlement, obs, policy, UnixMillis(now))
    previous = decision_from_json(rec.decision)
    transition = settle_transition(previous, fresh, reversal_of(obs))
    kept = transition.decision
    watching = _still_watched(rec, transition, late_watch_ms, reversal_watch_ms, now)
    if watching == rec.watching and (
        transition.kind is TransitionKind.HELD
        or (
            transition.kind is TransitionKind.UNCHANGED
            and same_evidence(kept.evidence, previous.evidence)
        )
    ):
        return False
    store_decision(
        txn,
        rec,
        previous,
        fresh,
        transition,
        watching,
        plan,
        _subject(rec, obs),
        f"source {rec.chain}",
    )
    return True


def _still_watched(
    rec: SettlementRecord,
    transition: Transition,
    late_watch_ms: int,
    reversal_watch_ms: int,
    now: int,
) -> bool:
    """Whether the source is still polled for ``rec`` after ``transition``: until terminal,
    then through the late-finality window of a timeout and the reversal window of a
    confirmation."""
    kept = transition.decision
    final_since = rec.terminal_at if rec.terminal_at is not None else now
    return still_watched(transition, rec.deadline, late_watch_ms, now) or (
        kept.verdict is Verdict.FINALITY_CONFIRMED
        and reversal_watch_ms > 0
        and now < final_since + reversal_watch_ms
    )


def _subject(rec: SettlementRecord, obs: SourceObservation) -> dict[str, Any]:
    """What an alert says the settlement is: the engine's keys, plus source and ref."""
    return {
        "settlement_id": rec.settlement_id,
        "tx_hash": rec.tx_hash,
        "source": rec.chain,
        "kind": rec.finality_mode,
        "ref": obs.ref,
    }
