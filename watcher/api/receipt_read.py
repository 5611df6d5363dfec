"""``GET /v1/settlements/{id}/receipt``'s answer, read where it is cheapest (as
its stored bytes: a receipt is read far more often than built).

At W = 1,000 a block's 100 receipts are fetched within a poll of their verdicts, in the
interpreter that also builds the next block's receipts: what a receipt read costs is what
the receipts of the next block wait for. So the answer is the stored text of the receipt,
as bytes (watcher/store/receipt_bytes.py: no decoding, validation or encoding), and, as
a SQLite store is read on the event
loop: one indexed statement (the settlement and its receipts), where the worker-thread round trip of a synchronous route
cost more CPU than the reads; a receipt being built is waited for there too, the task asleep
on the receipts component's count (watcher/receipts/waiting.py), holding no worker thread
(a hundred clients waiting for one block's receipts held the threadpool's 40, and every
synchronous route queued behind them). On PostgreSQL the read and the wait go to the
threadpool (a network round trip must not stall the loop).
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from guard.settlement import Verdict
from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError
from watcher.api.views import RECEIPT_WAIT_S, reread_s, wait_signed
from watcher.receipts.builder import ReceiptBuilder
from watcher.receipts.waiting import wait_receipt_async
from watcher.store import SettlementNotFound
from watcher.store.receipts_store import ReceiptAnswer, receipt_store


async def receipt_answer(deps: ApiDeps, settlement_id: str, owner: str) -> bytes:
    """The signed receipt of ``owner``'s settlement as the bytes answered; a 404
    :class:`ApiError` for no such settlement, or while it has none (not terminal, or its
    receipt still not built after the wait)."""
    if not on_loop(deps):  # a network round trip: off the loop
        return await run_in_threadpool(_answer, deps, settlement_id, owner)
    found = _read(deps, settlement_id, owner)
    if found.receipt is not None:
        return found.receipt
    if deps.receipts is None:
        raise _missing(settlement_id, found.verdict, pending=True)
    store = receipt_store(deps.store)
    receipt = await wait_receipt_async(  # being built: the task sleeps, no thread is held
        lambda: store.latest_bytes(settlement_id),
        deps.receipts.signal,
        settlement_id,
        RECEIPT_WAIT_S,
        reread_s(deps, found.chain),
    )
    if receipt is None:
        raise _missing(
            settlement_id, found.verdict, pending=True, why=_why(deps, settlement_id, found.chain)
        )
    return receipt


def on_loop(deps: ApiDeps) -> bool:
    """Whether the receipt is read on the event loop: only from SQLite (a local file; a
    PostgreSQL round trip must not stall the loop)."""
    return deps.config.store.url.startswith("sqlite")


def _why(deps: ApiDeps, settlement_id: str, chain: str) -> str | None:
    """What the settlement's receipt waits for (Ethereum consensus), when its builder knows."""
    builder = None if deps.receipts is None else deps.receipts.builders.get(chain)
    if not isinstance(builder, ReceiptBuilder) or builder.consensus is None:
        return None
    return builder.consensus.waiting_for(settlement_id)


def _answer(deps: ApiDeps, settlement_id: str, owner: str) -> bytes:
    found = _read(deps, settlement_id, owner)
    return found.receipt if found.receipt is not None else _waited(deps, settlement_id, found)


def _read(deps: ApiDeps, settlement_id: str, owner: str) -> ReceiptAnswer:
    """The settlement and its receipt (one statement); the 404s of no settlement, or of one
    that is not terminal."""
    try:
        found = receipt_store(deps.store).answer(settlement_id, owner)
    except SettlementNotFound:
        raise ApiError(404, f"settlement_id: no settlement {settlement_id!r}") from None
    if not Verdict(found.verdict).terminal:
        raise _missing(settlement_id, found.verdict, pending=False)
    return found


def _waited(deps: ApiDeps, settlement_id: str, found: ReceiptAnswer) -> bytes:
    """The receipt of a terminal verdict, waited for (it is being built); else its 404."""
    receipt = wait_signed(deps, settlement_id, found.chain)
    if receipt is None:
        raise _missing(
            settlement_id, found.verdict, pending=True, why=_why(deps, settlement_id, found.chain)
        )
    return receipt


def _missing(settlement_id: str, verdict: str, pending: bool, why: str | None = None) -> ApiError:
    """The 404 of a settlement without a receipt (``pending``: terminal, being built;
    ``why``: what it waits for, e.g. Ethereum consensus to finalize its block)."""
    waits = f" ({why})" if why else ""
    return ApiError(
        404,
        f"settlement {settlement_id} has no receipt yet: verdict {verdict}"
        + (f"; its signed receipt is not built yet{waits}, retry shortly" if pending else ""),
        verdict=verdict,
        pending=pending,
    )
