"""Receipt bodies for source settlements (Stripe, RQ, Celery): from the stored decision alone.

A source has no node to fetch proofs from: what the verdict rests on is already in the stored
decision (its evidence: the source's status, the event ids, the objects and their digest),
and the settlement's events give its history. The body is :func:`guard.receipts.offchain_body`
with chain id 0 and ``tx_hash`` = keccak256 of the reference (see docs/receipts.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from guard.canonical import digest
from guard.receipts import (
    OFFCHAIN_CHAIN_ID,
    VERDICT_KIND,
    OffchainTerms,
    Subject,
    offchain_binding_body,
    offchain_body,
    ref_hash,
)
from guard.settlement import Verdict
from watcher.store import SettlementRecord
from watcher.store.receipts_store import TerminalEvent

HistoryLoader = Callable[[str], Sequence[TerminalEvent]]
"""Returns the lifecycle events of a settlement (with their time), oldest first."""


class SourceReceiptBuilder:
    """Builds decision receipt bodies for the settlements of one source."""

    def __init__(self, source: str, source_kind: str, signer: str, history: HistoryLoader) -> None:
        self.source = source
        self.source_kind = source_kind
        self.signer = signer
        self.history = history

    def subject(self, rec: SettlementRecord) -> Subject:
        """The common fields: chain id 0, and keccak256 of the ref where the tx hash goes."""
        return Subject(
            rec.settlement_id, rec.chain, OFFCHAIN_CHAIN_ID, ref_hash(rec.tx_hash), self.signer
        )

    def decision_body(self, rec: SettlementRecord, now: int) -> dict[str, Any]:
        """The body attesting ``rec``'s terminal decision; ValueError if it has none."""
        decision = rec.decision
        if str(decision.get("verdict")) not in VERDICT_KIND or decision.get("deadline") is None:
            raise ValueError(f"{rec.settlement_id}: {rec.verdict} is not a terminal decision")
        terms = self._terms(rec)
        state = None if rec.dependent_state is None else digest(rec.dependent_state)
        issued_at = now
        if rec.verdict == Verdict.TIMEOUT_TREATED_AS_FAILURE:
            issued_at = max(now, int(decision["deadline"]))
        return offchain_body(
            self.subject(rec), issued_at, decision, terms, self._history(rec), state
        )

    def binding_body(self, rec: SettlementRecord, now: int) -> dict[str, Any] | None:
        """The binding of ``rec``'s dependent state to the source, its ref and the deadline
        (None when it has none)."""
        if rec.dependent_state is None:
            return None
        return offchain_binding_body(
            self.subject(rec), now, digest(rec.dependent_state), self._terms(rec), rec.deadline
        )

    def _terms(self, rec: SettlementRecord) -> OffchainTerms:
        return OffchainTerms(
            source_kind=self.source_kind,
            source=rec.chain,
            ref=rec.tx_hash,
            initiated_at=rec.initiated_at,
            timeout_ms=rec.timeout_ms,
        )

    def _history(self, rec: SettlementRecord) -> list[dict[str, Any]]:
        """The settlement's verdict events, ending with the decision being attested."""
        out: list[dict[str, Any]] = []
        for event in self.history(rec.settlement_id):
            decision = event.payload.get("now") or event.payload
            evidence = decision.get("evidence") or {}
            out.append(
                {
                    "event": event.kind,
                    "at": event.created_at,
                    "verdict": decision.get("verdict"),
                    "decision_digest": decision.get("digest"),
                    "evidence_kind": evidence.get("kind"),
                }
            )
        if not out or out[-1]["decision_digest"] != rec.digest:
            evidence = rec.decision.get("evidence") or {}
            out.append(
                {
                    "event": "decision",
                    "at": rec.terminal_at if rec.terminal_at is not None else rec.updated_at,
                    "verdict": rec.verdict,
                    "decision_digest": rec.digest,
                    "evidence_kind": evidence.get("kind"),
                }
            )
        return out
