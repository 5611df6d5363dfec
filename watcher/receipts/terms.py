"""The timeout terms a receipt states: the deadline arithmetic a verifier redoes offline.

Written once for the timeout receipt and the reorged-out deposit's failure receipt, which
both say "nothing final by this deadline" and must state the same terms the same way."""

from __future__ import annotations

from guard.receipt_bodies import TimeoutTerms
from watcher.config.chains import ChainConfig
from watcher.store import SettlementRecord


def timeout_terms(rec: SettlementRecord, chain: ChainConfig) -> TimeoutTerms:
    """``rec``'s registration time, asked timeout, the wait cap in force and its deadline.

    The cap is the chain's ``max_wait_s`` unless the stored deadline shows another was in
    force at registration (the config changed since): then the one the deadline implies."""
    max_wait = int(chain.max_wait_s * 1000)
    if rec.initiated_at + min(rec.timeout_ms, max_wait) != rec.deadline:
        max_wait = rec.deadline - rec.initiated_at  # the policy in force at registration
    return TimeoutTerms(
        initiated_at=rec.initiated_at,
        timeout_ms=rec.timeout_ms,
        max_wait_ms=max_wait,
        deadline=rec.deadline,
        decided_at=rec.initiated_at + int(rec.decision.get("elapsed_ms", 0)),
    )
