"""Undoing a reorg in the store, and saying what was decided: a value, not fields.

:func:`undo_reorg` runs inside the block transaction that first sees the new branch: it
drops the headers above the common ancestor, clears every inclusion (or replacing tx)
anchored there, records the reorg with its events and alert rows, and returns a
:class:`ReorgOutcome`: which settlements it touched, which terminal verdicts lost their
ground, and the reversal those are re-decided under.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from chains.models import BlockHeader
from chains.tracker import Reorg
from guard.event_kinds import EventKind
from guard.settlement import (
    Evidence,
    Reversal,
    Settlement,
    Verdict,
    decision_as_json,
    decision_from_json,
    restated,
)
from guard.types import SettlementId, UnixMillis
from watcher.delivery.plan import OutboxPlan
from watcher.engine.decisions import record_event
from watcher.store.block_txn import BlockTxn
from watcher.store.records import SettlementRecord

log = logging.getLogger("finality.engine")


@dataclass(frozen=True)
class ReorgOutcome:
    """What undoing one reorg decided."""

    touched: frozenset[str]
    """Settlements whose inclusion (or replacing tx) it removed."""
    reversed: frozenset[str]
    """Among them, those confirmed: re-decided under :attr:`reversal`."""
    reversal: Reversal
    """The explicit reversal a confirmed verdict may be withdrawn with."""


def undo_reorg(
    txn: BlockTxn, reorg: Reorg, new_head: BlockHeader, chain: str, plan: OutboxPlan
) -> ReorgOutcome:
    """Undo inclusions above the common ancestor; record the reorg and its alerts."""
    anc = reorg.common_ancestor
    txn.rewind(anc.number)
    touched = _touched(txn, reorg)
    reversed_ids = _clear(txn, touched, anc.number, plan)
    _restate_moved_heads(txn, reorg, {r.settlement_id for r in touched}, plan)
    payload = _record(txn, reorg, new_head, touched, chain, bool(reversed_ids))
    record_event(txn, plan, EventKind.REORG, "critical" if reversed_ids else "warning", payload)
    plan.on_reorged_out(txn, touched, payload)
    log.warning(
        "chain %s: reorg of depth %d at ancestor %d (%s); %d watched settlements touched",
        chain,
        reorg.depth,
        reorg.recorded_ancestor.number,
        reorg.recorded_ancestor.hash,
        len(touched),
    )
    reversal = Reversal(
        reason=f"reorg of depth {reorg.depth} past block {anc.number + 1}",
        evidence=Evidence.of("reorg", UnixMillis(txn.now), **payload),
    )
    return ReorgOutcome(
        frozenset(r.settlement_id for r in touched), frozenset(reversed_ids), reversal
    )


def _touched(txn: BlockTxn, reorg: Reorg) -> list[SettlementRecord]:
    """Settlements anchored above the ancestor; after a walk below the window, also those
    anchored in recorded blocks the node no longer has."""
    anc = reorg.common_ancestor
    touched = txn.anchored_above(anc.number)
    if reorg.beyond_window:
        gone = [b.old_hash for b in reorg.replaced if b.number <= anc.number]
        seen = {r.settlement_id for r in touched}
        touched += [r for r in txn.anchored_in(gone) if r.settlement_id not in seen]
    return touched


def _clear(
    txn: BlockTxn, touched: list[SettlementRecord], ancestor: int, plan: OutboxPlan
) -> set[str]:
    """Clear each anchor; return the confirmed ones (their verdict lost its ground)."""
    reversed_ids: set[str] = set()
    for rec in touched:
        txn.clear_anchor(rec)
        if rec.verdict == Verdict.FINALITY_CONFIRMED:
            reversed_ids.add(rec.settlement_id)
        elif rec.verdict == Verdict.SETTLEMENT_FAILED:
            # The failure stands (the caller may have discarded already), but the block
            # that proved it is gone: say so, so that someone can look.
            evidence = {
                "settlement_id": rec.settlement_id,
                "tx_hash": rec.tx_hash,
                "block_number": rec.block_number or rec.replaced_block_number,
                "common_ancestor": ancestor,
            }
            record_event(
                txn, plan, "failure_evidence_reorged", "warning", evidence, rec.settlement_id
            )
    return reversed_ids


def _record(
    txn: BlockTxn,
    reorg: Reorg,
    new_head: BlockHeader,
    touched: list[SettlementRecord],
    chain: str,
    violation: bool,
) -> dict[str, Any]:
    """Store the reorg row; return the payload its event and alerts carry (its ancestor: a
    block known to be on both branches, chains.tracker ``Reorg.recorded_ancestor``)."""
    anc = reorg.recorded_ancestor
    replaced = [
        {"number": b.number, "old_hash": b.old_hash, "new_hash": b.new_hash} for b in reorg.replaced
    ]
    touched_ids = [r.settlement_id for r in touched]
    reorg_id = txn.record_reorg(
        depth=reorg.depth,
        ancestor_number=anc.number,
        ancestor_hash=anc.hash,
        old_head_number=reorg.old_head.number,
        old_head_hash=reorg.old_head.hash,
        new_head_number=new_head.number,
        new_head_hash=new_head.hash,
        replaced=replaced,
        touched=touched_ids,
        finality_violation=violation,
    )
    payload: dict[str, Any] = {
        "reorg_id": reorg_id,
        "chain": chain,
        "depth": reorg.depth,
        "common_ancestor": {"number": anc.number, "hash": anc.hash},
        "replaced": replaced,
        "touched": touched_ids,
    }
    if reorg.beyond_window:
        # No block we followed survived: the depth counts the blocks known to be replaced
        # (a lower bound) and the ancestor is the highest block known to be common.
        payload["beyond_window"] = True
    return payload


EVIDENCE_REACH = 256
"""How far below the ancestor a settlement's inclusion may sit for its decision's head to
be looked at (a decision's head is its inclusion + N - 1 unless decided late)."""


def _restate_moved_heads(txn: BlockTxn, reorg: Reorg, touched: set[str], plan: OutboxPlan) -> None:
    """Terminal decisions the reorg left standing whose evidence named a head block it
    replaced: re-stated on the new branch's block at that height (same verdict: the tx is
    as deep there), with a ``decision_restated`` event so the receipts component signs the
    new decision. Without this the receipt waited for ever on a block the chain no longer
    has (the chaos soak's "no finality receipt in time"). A head the new branch does not
    reach (a shorter branch) is left: its receipt waits, and says why."""
    anc = reorg.common_ancestor.number
    new_hash: dict[int, str | None] = {b.number: b.new_hash for b in reorg.replaced}
    for rec in txn.decided_between(anc - EVIDENCE_REACH, anc):
        previous = decision_from_json(rec.decision)
        evidence = previous.evidence
        if rec.settlement_id in touched or evidence is None:
            continue
        facts = dict(evidence.facts)
        head = facts.get("head_number")
        moved_to = new_hash.get(head) if isinstance(head, int) and head > anc else None
        if moved_to is None:
            continue
        settlement = Settlement(
            settlement_id=SettlementId(rec.settlement_id),
            initiated=True,
            initiated_at=UnixMillis(rec.initiated_at),
            timeout_ms=rec.timeout_ms,
        )
        fresh = restated(
            previous,
            settlement,
            Evidence.of(evidence.kind, evidence.observed_at, **{**facts, "head_hash": moved_to}),
        )
        as_json = decision_as_json(fresh)
        txn.save_decision(
            rec, fresh.verdict.value, fresh.digest, as_json, watching=rec.watching, terminal=True
        )
        payload = {"previous_digest": previous.digest, "now": as_json}
        record_event(txn, plan, EventKind.DECISION_RESTATED, "info", payload, rec.settlement_id)
