"""Time-only changes: a timeout, the end of a late-finality watch.

A timeout is a matter of time, not blocks: with no new block (a quiet chain) and after a
failed poll (a node that fails every poll), deadlines are still applied, decided at the
last processed head, so no settlement is held past its deadline by the node.
"""

from __future__ import annotations

import logging

from chains.errors import ChainError
from watcher.engine.payments import NO_TRANSFERS, PaymentCommits
from watcher.engine.settle import decide_settlement
from watcher.store.errors import StoreError

log = logging.getLogger("finality.engine")


class Deadlines(PaymentCommits):
    """The time-only part of a chain's engine."""

    def _deadlines_despite(self, failure: ChainError) -> None:
        """Deadlines after a failed poll (logged, not raised, if the store fails too)."""
        try:
            self._apply_deadlines()
        except StoreError as exc:
            log.warning(
                "chain %s: deadlines not applied after a failed poll (%s): %s",
                self.name,
                failure,
                exc,
            )

    def _apply_deadlines(self) -> int:
        """Time-only changes (timeouts, end of late watch) when no block arrived."""
        head = self.window.head
        if head is None:
            return 0
        now = self.clock()
        late_ms = int(self.config.late_watch_s * 1000)
        if not self.store.any_deadline_due(self.name, now, late_ms):
            return 0
        pos = self._position(head.number, head.hash)
        decisions = 0
        self._confirmed_blocks = []
        with self.store.block_txn(self.name, now, self.fence) as txn:
            due = txn.due(head.number, self._covered(self.finalized_number), late_ms)
            rules = self._rules()
            for rec in due:
                decisions += self._count(decide_settlement(txn, rec, pos, now, rules))
            changed = txn.by_ids([r.settlement_id for r in due])
            paid, paid_decisions = self._payment_writes(txn, None, None, NO_TRANSFERS, pos, now)
            decisions += paid_decisions
        for rec in changed:
            self.index.update(rec)
        self._follow_payments(paid)
        self._observe_confirmed(now)
        return decisions
