"""Step writes committed in groups by one thread: many concurrent writes, one transaction.

Why: a step write's own work (lock the row, check the token, store the steps, the event)
is a fraction of a millisecond, but each in a transaction of its own, run on a worker of
the API's thread pool, cost about as much again in the hop between threads, the
transaction's begin and commit, and the threads queueing for the store's one writer lock.
Here the API hands each write to one thread, which takes every write waiting at that moment
and applies them in turn inside one transaction, then answers them all at once.

What does not change: each write locks its workflow's row and checks its fencing token
against the row as the writes before it in the group left it (the check and the change it
guards still commit together; writes to one workflow apply in the order they arrived). A
write refused (:class:`~watcher.workflows.steps.WorkflowRefused`) is refused before it
writes anything, so its refusal is its answer and the others commit. Nothing is answered
before the commit: an acknowledged write survives the process being killed (SQLite's WAL;
PostgreSQL's commit). Should the group's transaction fail (the store errs), every write of
the group is tried again alone, in a transaction of its own, and gets its own answer.

On PostgreSQL the group locks its rows in the order of their workflow ids, so the groups
of two daemon instances never wait on each other in a cycle.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from watcher.store.workflows_store import WorkflowGroup, WorkflowStore
from watcher.workflows.steps import WorkflowRefused

MAX_GROUP = 64
"""Most writes committed in one transaction (a longer queue waits for the next group)."""

Answer = Callable[[], dict[str, Any]]
"""Makes a write's answer once its group committed (a view, which may read the store)."""
Write = Callable[[WorkflowGroup], Answer]
"""A write: applied inside the group's transaction; returns what makes its answer, or
raises (:class:`WorkflowRefused`: refused before writing anything)."""


@dataclass(frozen=True)
class _Pending:
    key: str
    """The workflow written (the group's lock order)."""
    write: Write
    answer: Future[dict[str, Any]]


class GroupWriter:
    """The thread committing workflow writes in groups (started at the first write)."""

    def __init__(self, flows: WorkflowStore, max_group: int = MAX_GROUP) -> None:
        self.flows = flows
        self.max_group = max_group
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.groups = 0
        """Transactions committed (a test compares them with the writes made)."""

    def submit(self, workflow_id: str, write: Write) -> Future[dict[str, Any]]:
        """Queue ``write`` of ``workflow_id``: its answer once committed (or its error)."""
        answer: Future[dict[str, Any]] = Future()
        self._queue.put(_Pending(workflow_id, write, answer))
        if self._thread is None:
            self._start()
        return answer

    def run(self, workflow_id: str, write: Write) -> dict[str, Any]:
        """``write``'s answer, waited for (from any thread but the writer's own)."""
        return self.submit(workflow_id, write).result()

    async def run_async(self, workflow_id: str, write: Write) -> dict[str, Any]:
        """``write``'s answer, awaited on the event loop without blocking it."""
        return await asyncio.wrap_future(self.submit(workflow_id, write))

    def close(self) -> None:
        """Stop the thread once the writes queued before this call are answered (a later
        write starts it again)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=30)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="workflow-writer", daemon=True
                )
                self._thread.start()

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            group = [first]
            stop = False
            while len(group) < self.max_group:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                group.append(more)
            self._commit(group)
            if stop:
                return

    def _commit(self, group: list[_Pending]) -> None:
        """Apply ``group`` in one transaction and answer each write after the commit; if
        the transaction fails, each write again alone."""
        ordered = sorted(group, key=lambda p: p.key)  # stable: arrival order per workflow
        answers: list[tuple[_Pending, Answer | None, Exception | None]] = []
        try:
            with self.flows.group() as txn:
                for pending in ordered:
                    try:
                        answers.append((pending, pending.write(txn), None))
                    except WorkflowRefused as refused:  # nothing written: the rest go on
                        answers.append((pending, None, refused))
        except Exception as exc:
            if len(group) == 1:
                _answer(group[0], None, exc)
                return
            for pending in group:
                self._commit([pending])
            return
        self.groups += 1
        for pending, answer, error in answers:
            _answer(pending, answer, error)


def _answer(pending: _Pending, answer: Answer | None, error: Exception | None) -> None:
    """Settle ``pending``'s future: its answer made now (after the commit), or its error."""
    if not pending.answer.set_running_or_notify_cancel():
        return
    if answer is not None:
        try:
            pending.answer.set_result(answer())
        except Exception as exc:  # the answer's reads failed: the write itself is stored
            pending.answer.set_exception(exc)
        return
    assert error is not None
    pending.answer.set_exception(error)
