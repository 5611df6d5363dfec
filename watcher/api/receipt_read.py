"""``GET /v1/settlements/{id}/receipt``'s answer, read where it is cheapest (as
its stored bytes: a receipt is read far more often than built).

At W = 1,000 a block's 100 receipts are fetched within a poll of their verdicts, in the
interpreter that also builds the next block's receipts: what a receipt read costs is what
the receipts of the next block wait for. So the answer is the stored text of the receipt,
as bytes (watcher/store/receipt_bytes.py: no decoding, validation or encoding), read by one
indexed statement (the settlement and its receipts) through the store's one raw read,
awaited on the event loop on SQLite and PostgreSQL alike
(:meth:`~watcher.store.receipts_store.ReceiptStore.answer_now`): no worker thread's round
trip, and a PostgreSQL round trip is awaited, never blocking the loop. A receipt being
built is waited for there too, the task asleep on the receipts component's count
(watcher/receipts/waiting.py), holding no worker thread (a hundred clients waiting for one
block's receipts held the threadpool's 40, and every synchronous route queued behind them).

With ``?wait=S`` a caller waits the same way for a settlement that is not terminal yet, up to
S seconds: the task sleeps until its own receipt is stored (no read while nothing is stored
here but the chain's re-read), so a client that wants the receipt asks once, and has it as
soon as it is signed, instead of asking again and again. A wait that runs out is answered
exactly as a read without ``wait`` would be answered then (the 404 with ``verdict`` and
``pending``): ``wait`` changes when the answer comes, never what it says, so a ``200`` is
always a receipt (``curl -f`` and ``finality verify`` see nothing else).
"""

from __future__ import annotations

from guard.settlement import Verdict
from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError
from watcher.api.views import RECEIPT_WAIT_S, reread_s
from watcher.receipts.builder import ReceiptBuilder
from watcher.receipts.waiting import wait_receipt_async
from watcher.store import SettlementNotFound
from watcher.store.receipts_store import ReceiptAnswer, receipt_store


async def receipt_answer(
    deps: ApiDeps, settlement_id: str, owner: str, wait_s: float | None = None
) -> bytes:
    """The signed receipt of ``owner``'s settlement as the bytes answered; a 404
    :class:`ApiError` for no such settlement, or while it has none (not terminal, or its
    receipt still not built after the wait). ``wait_s`` (the caller's ``?wait=``): how long
    to wait for the receipt whatever the verdict; None: only for a receipt being built, up
    to :data:`RECEIPT_WAIT_S`."""
    found = await _stored(deps, settlement_id, owner)
    if found.receipt is not None:
        return found.receipt
    terminal = Verdict(found.verdict).terminal
    if wait_s is None and not terminal:
        raise _missing(settlement_id, found.verdict, pending=False)
    if deps.receipts is None:  # nothing here builds it, nothing would wake a wait
        raise _missing(settlement_id, found.verdict, pending=terminal)
    last = found

    async def reread() -> bytes | None:
        nonlocal last
        last = await _stored(deps, settlement_id, owner)
        return last.receipt

    receipt = await wait_receipt_async(  # the task sleeps, no thread is held
        reread,
        deps.receipts.signal,
        settlement_id,
        RECEIPT_WAIT_S if wait_s is None else wait_s,
        reread_s(deps, found.chain),
        others=lambda: not deps.handoff.owns(found.chain),
    )
    if receipt is not None:
        return receipt
    if not Verdict(last.verdict).terminal:
        raise _missing(settlement_id, last.verdict, pending=False)
    why = _why(deps, settlement_id, last.chain)
    raise _missing(settlement_id, last.verdict, pending=True, why=why)


def _why(deps: ApiDeps, settlement_id: str, chain: str) -> str | None:
    """What the settlement's receipt waits for (Ethereum consensus), when its builder knows."""
    builder = None if deps.receipts is None else deps.receipts.builders.get(chain)
    if not isinstance(builder, ReceiptBuilder) or builder.consensus is None:
        return None
    return builder.consensus.waiting_for(settlement_id)


async def _stored(deps: ApiDeps, settlement_id: str, owner: str) -> ReceiptAnswer:
    """The settlement and its receipt (one statement); the 404 of no settlement."""
    try:
        return await receipt_store(deps.store).answer_now(settlement_id, owner)
    except SettlementNotFound:
        raise ApiError(404, f"settlement_id: no settlement {settlement_id!r}") from None


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
