"""How many receipts the component stored, as a count a reader can wait on (issue 11).

``GET /v1/settlements/{id}/receipt`` for a verdict that just committed waits briefly for its
receipt, which the receipts thread builds right after the poll. It used to re-read the
store every 50 ms: up to 50 ms late, and at W = 1,000 eight clients' re-reads took the
interpreter from the thread building the receipts they waited for. Now a waiter sleeps on
this count and is woken when a batch is stored (one wake-up per store transaction).
"""

from __future__ import annotations

import threading


class Issued:
    """A count of stored receipts that only grows; :meth:`wait_past` sleeps until it moves."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._count = 0
        self._waiting = 0

    @property
    def count(self) -> int:
        """Receipts stored since start."""
        return self._count

    @count.setter
    def count(self, value: int) -> None:
        with self._changed:
            self._count = value
            self._changed.notify_all()

    @property
    def waiting(self) -> int:
        """Readers asleep in :meth:`wait_past` now."""
        return self._waiting

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

    def wait_for_waiters(self, count: int, timeout: float) -> bool:
        """Whether ``count`` readers are asleep in :meth:`wait_past` within ``timeout``
        seconds (a test's way to know a reader waits before it stores a receipt)."""
        with self._changed:
            return self._changed.wait_for(lambda: self._waiting >= count, timeout)
