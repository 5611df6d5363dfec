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
from guard.settlement import Evidence, Reversal, Verdict
from guard.types import UnixMillis
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
    payload = _record(txn, reorg, new_head, touched, chain, bool(reversed_ids))
    record_event(txn, plan, "reorg", "critical" if reversed_ids else "warning", payload)
    plan.on_reorged_out(txn, touched, payload)
    log.warning(
        "chain %s: reorg of depth %d at ancestor %d (%s); %d watched settlements touched",
        chain,
        reorg.depth,
        anc.number,
        anc.hash,
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
    """Store the reorg row; return the payload its event and alerts carry."""
    anc = reorg.common_ancestor
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
        # No block we followed survived: the ancestor is the node's block below our
        # window (a rebase) and the depth a lower bound.
        payload["beyond_window"] = True
    return payload
