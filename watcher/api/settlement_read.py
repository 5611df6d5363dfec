"""``GET /v1/settlements/{id}``'s answer, built where it is cheapest (callers
poll it: bench/README.md, "API under load").

A synchronous route is handed to a worker thread and its answer handed back to the event
loop: measured in-process, that round trip was a third of a settlement read's CPU (more
than the read itself), and the threads' contention for the GIL stretched the tail under
load. So the common read, a chain settlement still being watched, without dependent state,
on a SQLite store, is answered on the event loop: one indexed statement served from the
page cache (a WAL reader never waits for a writer) and a dict. Everything that may take
longer runs in the threadpool as before: any read on PostgreSQL (a network round trip must
not stall the loop), a terminal verdict (its signed receipt, waited for briefly), dependent
state (its binding receipt, signed on first read), a payment (its transfers), a source's
settlement.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool

from guard.payment import ADDRESS_KINDS
from guard.settlement import TERMINAL_VERDICTS
from watcher.api.deps import ApiDeps
from watcher.api.payments import payment_view
from watcher.api.source_settlements import source_view
from watcher.api.views import (
    chain_settlement_view,
    node_notes,
    settlement_at_head,
    waits_on_finalized,
)
from watcher.settlements import settlement_view
from watcher.store import SettlementRecord, StoreError


async def settlement_answer(deps: ApiDeps, settlement_id: str, owner: str) -> dict[str, Any]:
    """The view of ``owner``'s settlement ``settlement_id`` (a 404 ``ApiError`` if none)."""
    if not on_loop(deps):
        return await run_in_threadpool(_answer, deps, settlement_id, owner)
    rec, head = settlement_at_head(deps, settlement_id, owner)
    if plain(deps, rec):  # no receipt (not terminal), no binding (no state)
        return settlement_view(rec, head, now=deps.clock())
    return await run_in_threadpool(_view, deps, rec, head)


def plain_answer(deps: ApiDeps, settlement_id: str, owner: str) -> dict[str, Any] | None:
    """The view :func:`settlement_answer` would give on the event loop, or None where it
    would do anything else: not SQLite, no such settlement of ``owner`` (its 404), a view
    that is more than the row and its head, or a store error. What the hot read layer
    (:mod:`watcher.api.hot_read`) answers; None leaves the request to the route."""
    if not on_loop(deps):
        return None
    try:
        rec, head = deps.store.settlement_at_head(settlement_id, owner)
    except StoreError:  # SettlementNotFound included: the route answers it
        return None
    return settlement_view(rec, head, now=deps.clock()) if plain(deps, rec) else None


def on_loop(deps: ApiDeps) -> bool:
    """Whether a settlement is read on the event loop: only from SQLite (a local file; a
    PostgreSQL round trip must not stall the loop)."""
    return deps.config.store.url.startswith("sqlite")


def plain(deps: ApiDeps, rec: SettlementRecord) -> bool:
    """Whether the view is the row and its head alone (nothing more to read or sign, nothing
    to say about its node data: watcher/api/views.py ``node_notes``; a rule on the
    ``finalized`` tag reads the chain's recorded one too)."""
    source = deps.sources is not None and rec.chain in deps.sources.slots
    return not (
        source
        or rec.kind in ADDRESS_KINDS
        or rec.verdict in TERMINAL_VERDICTS
        or rec.dependent_state is not None
        or bool(node_notes(deps, rec))
        or waits_on_finalized(rec)
    )


def _answer(deps: ApiDeps, settlement_id: str, owner: str) -> dict[str, Any]:
    rec, head = settlement_at_head(deps, settlement_id, owner)
    return _view(deps, rec, head)


def _view(deps: ApiDeps, rec: SettlementRecord, head: int | None) -> dict[str, Any]:
    view = payment_view(deps, rec) or source_view(deps, rec)
    return view or chain_settlement_view(deps, rec, lambda _: head)
