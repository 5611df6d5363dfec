"""Waiting for a receipt being built, as ``GET /v1/settlements/{id}/receipt`` does.

A verdict commits first and its receipt follows, built by the receipts thread right after
the poll (watcher/receipts/component.py): a client asking in between is answered the receipt
as soon as it is stored rather than a 404 (and with ``?wait=``, a client asking before the
verdict too). The wait sleeps on the component's record of stored receipts
(watcher/receipts/issued.py), so it ends when its receipt is stored, not at the next tick of
a re-read loop, and costs no store read while nothing is stored. A receipt that another
instance stores (it holds the chain's lease) wakes nothing here: the caller says how often
to re-read then (``reread_s``, ``others``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from watcher.receipts.issued import Issued
from watcher.store.receipts_store import ReceiptStore


def wait_receipt(
    receipts: ReceiptStore,
    signal: Issued | None,
    settlement_id: str,
    wait_s: float,
    reread_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> bytes | None:
    """The settlement's current decision receipt as the bytes the API answers, waiting up to
    ``wait_s`` seconds of ``clock`` for it; None if it is not stored by then. Without a
    ``signal`` (no receipts component here) the store is read once."""
    deadline = clock() + wait_s
    while True:
        seen = signal.count if signal is not None else 0  # before the read: no lost wake-up
        receipt = receipts.latest_bytes(settlement_id)
        left = deadline - clock()
        if receipt is not None or signal is None or left <= 0:
            return receipt
        signal.wait_past(seen, min(reread_s, left))


async def wait_receipt_async(
    read: Callable[[], Awaitable[bytes | None]],
    signal: Issued,
    settlement_id: str,
    wait_s: float,
    reread_s: float,
    clock: Callable[[], float] = time.monotonic,
    others: Callable[[], bool] = lambda: True,
) -> bytes | None:
    """:func:`wait_receipt` for a coroutine: ``read`` (the store's raw read, awaited on the
    event loop) gives the receipt or None; between reads the task sleeps until a receipt of
    ``settlement_id`` is stored here, holding no thread. Every ``reread_s`` without one it
    reads the store again only if ``others()``: another instance may have stored it (it
    holds the chain's lease). While this one builds the chain's receipts its own wake-up is
    enough, and a wait of a minute costs one read, not one a second (a thousand clients
    waiting for their receipts took a fifth of the interpreter re-reading the store)."""
    deadline = clock() + wait_s
    with signal.expecting(settlement_id) as stored:  # before the read: no lost wake-up
        receipt = await read()
        while receipt is None:
            left = deadline - clock()
            if left <= 0:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stored.wait(), min(reread_s, left))
            if stored.is_set() or others():
                stored.clear()
                receipt = await read()
        return receipt
