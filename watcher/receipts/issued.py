"""How many receipts the component stored, as a count a reader can wait on (no polling of the store).

``GET /v1/settlements/{id}/receipt`` for a verdict that just committed waits briefly for its
receipt, which the receipts thread builds right after the poll. It used to re-read the
store every 50 ms: up to 50 ms late, and at W = 1,000 the clients' re-reads took the
interpreter from the thread building the receipts they waited for. Now a waiter sleeps
until a receipt is stored: a thread (:meth:`Issued.wait_past`) on any store, an event-loop
task (:meth:`Issued.expecting`) only on its own settlement's (a thousand tasks woken by
every batch, each re-reading the store on the loop, kept the loop busy for seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator


class Issued:
    """A count of stored receipts that only grows, and the readers waiting for one."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._count = 0
        self._waiting = 0
        self._wakes: dict[str, list[Callable[[], None]]] = {}
        """Per settlement id, the wake-ups of the event-loop tasks expecting its receipt."""

    @property
    def count(self) -> int:
        """Receipts stored since start."""
        return self._count

    @property
    def waiting(self) -> int:
        """Readers asleep in :meth:`wait_past` or expecting a receipt (:meth:`expecting`) now."""
        return self._waiting

    def stored(self, settlement_ids: Iterable[str]) -> None:
        """Receipts of ``settlement_ids`` were stored (one transaction): count them, wake
        the waiting threads and the tasks waiting for these settlements."""
        ids = list(settlement_ids)
        with self._changed:
            self._count += len(ids)
            self._changed.notify_all()
            wakes = [wake for sid in ids for wake in self._wakes.get(sid, [])]
        for wake in wakes:
            wake()

    def wait_past(self, seen: int, timeout: float) -> int:
        """Sleep until the count is no longer ``seen`` or ``timeout`` seconds pass (a
        receipt stored by another instance moves no count here: the caller re-reads after
        its timeout); returns the count. Read ``count`` *before* reading the store, then
        pass it here: a receipt stored in between is not missed."""
        with self._changed:
            self._waiting += 1
            self._changed.notify_all()  # wait_for_waiters
            try:
                self._changed.wait_for(lambda: self._count != seen, timeout)
            finally:
                self._waiting -= 1
            return self._count

    @contextlib.contextmanager
    def expecting(self, settlement_id: str) -> Iterator[asyncio.Event]:
        """For a coroutine: an event set (on its loop) each time a receipt of
        ``settlement_id`` is stored while the block runs. Enter it *before* reading the store:
        a receipt stored in between is not missed, and none stored later is, however long the
        task sleeps between its reads (it stays registered; the task holds no thread)."""
        loop = asyncio.get_running_loop()
        stored = asyncio.Event()

        def wake() -> None:  # in the thread that stored the receipts
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits now
                loop.call_soon_threadsafe(stored.set)

        with self._changed:
            self._wakes.setdefault(settlement_id, []).append(wake)
            self._waiting += 1
            self._changed.notify_all()  # wait_for_waiters
        try:
            yield stored
        finally:
            with self._changed:
                self._waiting -= 1
                waiting = self._wakes.get(settlement_id, [])
                if wake in waiting:
                    waiting.remove(wake)
                    if not waiting:
                        del self._wakes[settlement_id]

    def wait_for_waiters(self, count: int, timeout: float) -> bool:
        """Whether ``count`` readers are asleep within ``timeout`` seconds (a test's way to
        know a reader waits before it stores a receipt)."""
        with self._changed:
            return self._changed.wait_for(lambda: self._waiting >= count, timeout)
