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

On PostgreSQL a group locks its rows in the order of their workflow ids, so the groups of
two daemon instances never wait on each other in a cycle; and several groups are in flight
at once (:class:`GroupWriter`'s lanes), each workflow's writes always in the same one.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import zlib
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


Outcome = tuple[dict[str, Any] | None, Exception | None]
"""A write's answer, or its error."""


@dataclass(frozen=True)
class _Pending:
    key: str
    """The workflow written (the group's lock order)."""
    write: Write
    waiter: Future[dict[str, Any]] | None = None
    """Where a thread waits for the answer (:meth:`GroupWriter.run`)."""
    loop: asyncio.AbstractEventLoop | None = None
    """The event loop awaiting it (:meth:`GroupWriter.run_async`)..."""
    awaited: asyncio.Future[dict[str, Any]] | None = None
    """... on this future of that loop."""


class GroupWriter:
    """The threads committing workflow writes in groups (each started at its first write).

    ``lanes`` threads, each with its own queue and transaction; a workflow's writes always
    go to the same lane (by its id), so they apply in the order they arrived and two lanes
    never wait on one row. SQLite has one writer at a time: one lane. PostgreSQL runs
    transactions side by side, and a lane's statements wait on round trips to the server:
    several lanes keep several groups in flight, as the API's worker threads did.
    """

    def __init__(self, flows: WorkflowStore, lanes: int = 1, max_group: int = MAX_GROUP) -> None:
        self.flows = flows
        self._lanes = [_Lane(flows, max_group, i) for i in range(max(1, lanes))]

    @property
    def groups(self) -> int:
        """Transactions committed (a test compares them with the writes made)."""
        return sum(lane.groups for lane in self._lanes)

    def run(self, workflow_id: str, write: Write) -> dict[str, Any]:
        """``write``'s answer, waited for (from any thread but the writer's own)."""
        waiter: Future[dict[str, Any]] = Future()
        self._lane(workflow_id).put(_Pending(workflow_id, write, waiter=waiter))
        return waiter.result()

    async def run_async(self, workflow_id: str, write: Write) -> dict[str, Any]:
        """``write``'s answer, awaited on the event loop without blocking it (the answers
        of a group reach each loop in one wake-up)."""
        loop = asyncio.get_running_loop()
        awaited: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._lane(workflow_id).put(_Pending(workflow_id, write, loop=loop, awaited=awaited))
        return await awaited

    def close(self) -> None:
        """Stop the threads once the writes queued before this call are answered (a later
        write starts its lane again)."""
        for lane in self._lanes:
            lane.close()

    def _lane(self, workflow_id: str) -> _Lane:
        if len(self._lanes) == 1:
            return self._lanes[0]
        return self._lanes[zlib.crc32(workflow_id.encode()) % len(self._lanes)]


class _Lane:
    """One thread, its queue, one transaction per group."""

    def __init__(self, flows: WorkflowStore, max_group: int, number: int) -> None:
        self.flows = flows
        self.max_group = max_group
        self.name = f"workflow-writer-{number}"
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.groups = 0
        """Transactions this lane committed."""

    def put(self, pending: _Pending) -> None:
        """Queue ``pending`` (the thread starts if it is not running)."""
        self._queue.put(pending)
        if self._thread is None:
            self._start()

    def close(self) -> None:
        """Stop the thread once the writes queued before this call are answered."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=30)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
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
            _deliver(self._commit(group))
            if stop:
                return

    def _commit(self, group: list[_Pending]) -> list[tuple[_Pending, Outcome]]:
        """Apply ``group`` in one transaction; each write's outcome, its answer made after
        the commit. If the transaction fails, each write again alone."""
        ordered = sorted(group, key=lambda p: p.key)  # stable: arrival order per workflow
        made: list[tuple[_Pending, Answer | None, Exception | None]] = []
        try:
            with self.flows.group() as txn:
                for pending in ordered:
                    try:
                        made.append((pending, pending.write(txn), None))
                    except WorkflowRefused as refused:  # nothing written: the rest go on
                        made.append((pending, None, refused))
        except Exception as exc:
            if len(group) == 1:
                return [(group[0], (None, exc))]
            return [outcome for pending in group for outcome in self._commit([pending])]
        self.groups += 1
        return [(pending, _outcome(answer, error)) for pending, answer, error in made]


def _outcome(answer: Answer | None, error: Exception | None) -> Outcome:
    """The answer made now (after the commit), or the write's error."""
    if answer is None:
        return None, error
    try:
        return answer(), None
    except Exception as exc:  # the answer's reads failed: the write itself is stored
        return None, exc


def _deliver(outcomes: list[tuple[_Pending, Outcome]]) -> None:
    """Hand each outcome to whoever waits: a thread at once, each event loop all of its
    answers in one call (one wake-up of the loop per group, not per write)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Outcome]]] = {}
    for pending, outcome in outcomes:
        if pending.waiter is not None:
            _settle_waiter(pending.waiter, outcome)
        elif pending.loop is not None and pending.awaited is not None:
            by_loop.setdefault(pending.loop, []).append((pending.awaited, outcome))
    for loop, settled in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is left to answer
            loop.call_soon_threadsafe(_settle_awaited, settled)


def _settle_waiter(waiter: Future[dict[str, Any]], outcome: Outcome) -> None:
    answer, error = outcome
    if error is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(answer or {})


def _settle_awaited(settled: list[tuple[asyncio.Future[Any], Outcome]]) -> None:
    """On the loop: each future its answer (a request gone meanwhile is skipped)."""
    for awaited, (answer, error) in settled:
        if awaited.done():
            continue
        if error is not None:
            awaited.set_exception(error)
        else:
            awaited.set_result(answer)
