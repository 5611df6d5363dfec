"""A client's read of a settlement's signed receipt, waiting for it when asked to.

``GET /v1/settlements/{id}/receipt?wait=S`` is answered the moment the receipt is stored, or
after S seconds (at most :data:`RECEIPT_WAIT_MAX_S`) with the 404 a read without ``wait``
gets (docs/receipts.md). A caller's longer wait is a few such requests in a row: no poll
loop, one request per minute at most while the settlement is not final. The sync and async
clients share the loop's rule here; each does the request with its own I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from watcher.client.errors import Rejected

RECEIPT_WAIT_MAX_S = 60.0
"""The longest ``?wait=`` the daemon takes (a longer wait is asked again)."""

Get = Callable[..., Any]
"""The client's ``request`` bound to ``GET`` and the receipt's path: keywords for httpx."""


def receipt(
    get: Get,
    clock: Callable[[], float],
    read_timeout: float | None,
    wait_s: float | None,
) -> dict[str, Any]:
    """The receipt ``get`` answers, asking again while it says "none yet" and ``wait_s``
    has not run out on ``clock``; :class:`Rejected` as the daemon answered, otherwise."""
    deadline = None if wait_s is None else clock() + wait_s
    while True:
        try:
            return dict(get(**_ask(deadline, clock(), read_timeout)))
        except Rejected as exc:
            if not _again(exc, deadline, clock()):
                raise


async def receipt_async(
    get: Callable[..., Awaitable[Any]],
    clock: Callable[[], float],
    read_timeout: float | None,
    wait_s: float | None,
) -> dict[str, Any]:
    """:func:`receipt` for the async client."""
    deadline = None if wait_s is None else clock() + wait_s
    while True:
        try:
            return dict(await get(**_ask(deadline, clock(), read_timeout)))
        except Rejected as exc:
            if not _again(exc, deadline, clock()):
                raise


def _ask(deadline: float | None, now: float, read_timeout: float | None) -> dict[str, Any]:
    """The keywords of one request: none without a deadline; else ``?wait=`` for what is
    left of it (at most :data:`RECEIPT_WAIT_MAX_S`), and a timeout that lets the daemon use
    all of that before the client's own read timeout starts."""
    if deadline is None:
        return {}
    wait = round(min(max(deadline - now, 0.0), RECEIPT_WAIT_MAX_S), 3)
    return {
        "params": {"wait": wait},
        "timeout": None if read_timeout is None else wait + read_timeout,
    }


def _again(exc: Rejected, deadline: float | None, now: float) -> bool:
    """Whether to ask again after ``exc``: it says "no receipt yet" (a 404 naming the
    settlement's ``verdict``, not an unknown settlement) and the deadline is still ahead."""
    return deadline is not None and now < deadline and exc.status == 404 and "verdict" in exc.body
