"""Recording what the quorum gate reports: ``rpc_disagreement`` and ``finality_violation``.

The gate lives in chains/, which may not touch the store; it reports through a plain
callback. :func:`event_recorder` builds that callback for one chain: each report becomes an
event, with its alert deliveries, in a transaction of its own (the gate is asked before the
engine opens the block's transaction, so the two never nest).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from watcher.delivery.plan import OutboxPlan
from watcher.store import Store

log = logging.getLogger(__name__)


def event_recorder(
    store: Store,
    chain: str,
    clock: Callable[[], int],
    plan: Callable[[], OutboxPlan | None],
) -> Callable[[str, str, dict[str, Any]], None]:
    """A gate ``alert`` callback that records events for ``chain`` at ``clock()``.

    ``plan`` returns the chain's outbox plan once it exists (the engine that owns it is
    built after the gate), so alert channels receive the event too."""

    def alert(kind: str, severity: str, payload: dict[str, Any]) -> None:
        body = {"chain": chain, **payload}
        log.warning("chain %s: %s: %s", chain, kind, body)
        with store.block_txn(chain, clock()) as txn:
            event_id = txn.record_event(kind, severity, body)
            outbox = plan()
            if outbox is not None:
                outbox.on_event(txn, event_id, kind, severity, body, None)

    return alert
