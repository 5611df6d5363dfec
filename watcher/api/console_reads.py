"""Two read-only routes the operator console draws from, usable by any reader:

- ``GET /v1/settlements/{id}/timeline``: a settlement's story in order: registered, every
  reorg that touched it, included in block B, each confirmation k/N with the time its block
  was made, its verdict, the receipts issued and its commit's delivery. The page shows it and
  plots confirmations against time from it, without composing facts from five routes.
- ``GET /v1/stats/time-to-final?window_s=3600``: per chain, how long the caller's
  settlements took from registration to ``FINALITY_CONFIRMED`` (count, median, p95), over
  those confirmed in the window.
- ``GET /v1/search?q=…``: the caller's settlements a search box means: ``q`` as a
  settlement id, as a tx hash on any chain, as a payment's ``reference`` on any chain, or as
  a source settlement's ``ref``.
- ``GET /v1/events/latest``: the newest event's id, so a live page can stream from now on
  (``Last-Event-ID``) instead of replaying the whole history first.

Both show only the caller's own settlements, as every other read does.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Query

from guard.errors import InvalidHash
from guard.event_kinds import LIFECYCLE_EVENT, EventKind
from guard.hexes import parse_tx_hash
from guard.settlement import Verdict
from watcher.api.auth import Reader
from watcher.api.deps import ApiDeps
from watcher.api.models.console import LatestEventView, SearchView, TimelineView, TimeToFinalView
from watcher.api.models.errors import ERRORS
from watcher.api.views import settlement_or_error
from watcher.engine.payment_registration import payment_id
from watcher.store import SettlementNotFound, SettlementRecord
from watcher.store.console_store import final_durations, header_times, last_event_id
from watcher.store.receipts_store import receipt_store

MAX_WINDOW_S = 7 * 24 * 3600
"""Longest window of the time-to-final figures (a week)."""

MAX_DEPTH_STEPS = 256
"""Confirmation steps listed at most (a chain with N = 10,000 lists its first 256)."""

TERMINAL_STEPS: dict[str, str] = {
    Verdict.FINALITY_CONFIRMED: "final",
    Verdict.SETTLEMENT_FAILED: "failed",
    Verdict.TIMEOUT_TREATED_AS_FAILURE: "timed_out",
}
"""The step each terminal verdict closes the timeline with."""

LIFECYCLE_KINDS = frozenset({EventKind.REORG, *LIFECYCLE_EVENT.values()})
"""Events the timeline already tells as its own steps (reorged, final, failed, timed out)."""


def nearest_rank(ordered: list[int], fraction: float) -> int:
    """The ``fraction`` percentile of ascending ``ordered`` by nearest rank (non-empty)."""
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def search(deps: ApiDeps, q: str, owner: str) -> list[str]:
    """Ids of ``owner``'s settlements that ``q`` names (see the module doc), each once."""
    chains = [c.name for c in deps.config.chains]
    candidates: list[tuple[str | None, str]] = [(None, q)]  # (chain or source, tx hash) / id
    try:
        tx = parse_tx_hash(q)
        candidates += [(chain, tx) for chain in chains]
    except InvalidHash:
        candidates += [(None, payment_id(chain, owner, q)) for chain in chains]
        candidates += [(source.name, q) for source in deps.config.sources]
    found: list[str] = []
    for name, key in candidates:
        try:
            if name is None:
                rec = deps.store.settlement(key, owner=owner)
            else:
                rec = deps.store.settlement_by_tx(name, key, owner=owner)
        except SettlementNotFound:
            continue
        if rec.settlement_id not in found:
            found.append(rec.settlement_id)
    return found


def timeline(deps: ApiDeps, rec: SettlementRecord, owner: str) -> list[dict[str, Any]]:
    """The steps of ``rec`` in the order they happened (see the module doc)."""
    steps: list[dict[str, Any]] = [{"step": "registered", "at": rec.initiated_at}]
    for reorg in reversed(deps.store.reorgs(rec.chain, 1000, owner=owner)):
        if rec.settlement_id in reorg.touched:
            steps.append(
                {
                    "step": "reorged",
                    "at": reorg.detected_at,
                    "reorg_id": reorg.id,
                    "depth": reorg.depth,
                    "finality_violation": reorg.finality_violation,
                }
            )
    if rec.sender is not None and rec.block_number is None:
        # Pending now, its sender and nonce known (a replacement can be proven): the store
        # keeps no time for it, and after inclusion nothing says it was ever pending.
        steps.append({"step": "seen_pending", "at": None, "sender": rec.sender, "nonce": rec.nonce})
    if rec.block_number is not None:
        steps += _inclusion(deps, rec)
    terminal = TERMINAL_STEPS.get(rec.verdict)
    if terminal is not None:
        steps.append({"step": terminal, "at": rec.terminal_at, "verdict": rec.verdict})
    for event in deps.store.events(rec.settlement_id, owner=owner):
        if event.kind not in LIFECYCLE_KINDS:  # a violation, late finality, a restatement...
            steps.append(
                {
                    "step": "event",
                    "at": event.created_at,
                    "kind": event.kind,
                    "severity": event.severity,
                    "event_id": event.id,
                }
            )
    for receipt in receipt_store(deps.store).for_settlement(rec.settlement_id):
        steps.append({"step": "receipt_issued", "at": receipt.created_at, "kind": receipt.kind})
    outbox = deps.store.outbox()
    for row in outbox.list(None, rec.settlement_id, 0, 100, owner=owner):
        steps.append(
            {
                "step": f"{row.kind}_{row.state}",
                "at": row.delivered_at or row.updated_at,
                "delivery_id": row.id,
                "kind": row.kind,
                "state": row.state,
                "attempts": row.attempts,
            }
        )
    return steps


def _inclusion(deps: ApiDeps, rec: SettlementRecord) -> list[dict[str, Any]]:
    """Included in block B, then confirmation k of N as each block above it was made (the
    block's own timestamp; null where the header has left the stored window)."""
    assert rec.block_number is not None
    head = deps.store.chain(rec.chain)
    depth = (
        0 if head is None or head.head_number is None else head.head_number - rec.block_number + 1
    )
    shown = max(0, min(depth, rec.required_confirmations, MAX_DEPTH_STEPS))
    last = rec.block_number + max(shown, 1) - 1
    times = header_times(deps.store.reader, rec.chain, rec.block_number, last)

    def at(number: int) -> int | None:
        stamp = times.get(number)
        return None if stamp is None else stamp * 1000

    steps: list[dict[str, Any]] = [
        {
            "step": "included",
            "at": at(rec.block_number),
            "block_number": rec.block_number,
            "block_hash": rec.block_hash,
        }
    ]
    for k in range(1, shown + 1):
        steps.append(
            {
                "step": "depth",
                "at": at(rec.block_number + k - 1),
                "confirmations": k,
                "required": rec.required_confirmations,
            }
        )
    return steps


def router(deps: ApiDeps) -> APIRouter:
    """The console's read routes over ``deps``."""
    api = APIRouter()

    @api.get(
        "/v1/settlements/{settlement_id}/timeline",
        response_model=TimelineView,
        response_model_exclude_unset=True,
        responses={404: ERRORS[404]},
    )
    def get_timeline(caller: Reader, settlement_id: str) -> dict[str, Any]:
        """A settlement's timeline: registered, reorgs, inclusion, each confirmation with
        its block's time, verdict, receipts, deliveries (times in ms)."""
        rec = settlement_or_error(deps, settlement_id, caller.name)
        return {
            "settlement_id": rec.settlement_id,
            "chain": rec.chain,
            "verdict": rec.verdict,
            "required_confirmations": rec.required_confirmations,
            "steps": timeline(deps, rec, caller.name),
        }

    @api.get("/v1/stats/time-to-final", response_model=TimeToFinalView)
    def time_to_final(
        caller: Reader,
        window_s: int = Query(default=3600, ge=1, le=MAX_WINDOW_S),
    ) -> dict[str, Any]:
        """Per chain: count, median and p95 of registration-to-final (ms) of the caller's
        settlements confirmed in the last ``window_s`` seconds."""
        since = deps.clock() - window_s * 1000
        chains = []
        for chain, took in sorted(final_durations(deps.store.reader, since, caller.name).items()):
            chains.append(
                {
                    "chain": chain,
                    "count": len(took),
                    "median_ms": nearest_rank(took, 0.5),
                    "p95_ms": nearest_rank(took, 0.95),
                }
            )
        return {"window_s": window_s, "chains": chains}

    @api.get("/v1/search", response_model=SearchView)
    def search_settlements(
        caller: Reader, q: str = Query(min_length=1, max_length=256)
    ) -> dict[str, list[str]]:
        """The caller's settlements ``q`` names: an id, a tx hash, a payment's reference or
        a source's ref (``settlement_ids``: empty when nothing matches)."""
        return {"settlement_ids": search(deps, q.strip() or q, caller.name)}

    @api.get("/v1/events/latest", response_model=LatestEventView)
    def latest_event(caller: Reader) -> dict[str, int]:
        """The newest event's id (0: none yet): stream ``/v1/events`` after it for what
        happens from now on."""
        return {"last_event_id": last_event_id(deps.store.reader)}

    return api
