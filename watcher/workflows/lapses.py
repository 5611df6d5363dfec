"""The component that notices workflow leases lapsing (``workflow_lease_expired``).

A holder that dies stops renewing; nobody may be asking about its workflow yet. Every
:data:`CHECK_S` this thread records one ``workflow_lease_expired`` event per lapsed lease
(to ``/v1/events`` and the alert channels that ask for it), so an operator hears of the dead
agent before a successor shows up. Each lease is noted once across every daemon instance
(the note is made under the workflow's row lock); a takeover notes an unnoticed lapse itself.
"""

from __future__ import annotations

import logging
import threading

from watcher.store.errors import StoreError
from watcher.workflows.service import WorkflowService

log = logging.getLogger("finality.workflows")

CHECK_S = 0.5
"""How often lapsed leases are looked for (one indexed read when there are none)."""


class WorkflowLapses:
    """A :class:`~watcher.components.Component`: a thread calling
    :meth:`WorkflowService.note_lapses` every :data:`CHECK_S`."""

    def __init__(self, service: WorkflowService, every_s: float = CHECK_S) -> None:
        self.service = service
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread."""
        self._thread = threading.Thread(target=self._run, name="workflow-lapses", daemon=True)
        self._thread.start()

    def after_poll(self, chain: str) -> None:
        """Nothing to do after a chain's poll."""

    def stop(self) -> None:
        """Stop the thread (it finishes the round it is in), and the service's writer once
        the writes queued are answered."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.service.steps.writer.close()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.service.note_lapses()
            except StoreError as exc:  # the store is down: say so, try again next round
                log.warning("workflow leases: lapse check failed: %s", exc)
