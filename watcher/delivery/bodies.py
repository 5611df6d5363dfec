"""The bodies of commit-channel rows, assembled when their first attempt goes out.

A ``commit`` or ``discard`` carries the signed receipt of the decision it reports, and a
``finality_violation`` the signed revocation of the receipt it withdraws. The receipts part
signs after the verdict commits, so the body waits for them. A commit or discard never goes
without its receipt (unless the decision has none by design: a replacement or a payment on a
chain whose headers do not re-hash; ``receipt_unavailable`` then says so): the receipt is the proof the receiver can check, and a decision whose
receipt cannot be built (the node's data does not rebuild the header's roots) is not one to
act on. Past ``receipt_wait_s`` it is still waited for, only looked at less often
(:meth:`BodyAssembler.look_again_at`). A violation goes without its revocation after
``receipt_wait_s`` (the withdrawal matters more than its proof) and says where to fetch it.
Once assembled, the body is stored, so every retry sends the same bytes.
"""

from __future__ import annotations

from typing import Any

from guard.settlement import Verdict
from watcher.delivery.format import (
    BINDING_RECEIPT_KIND,
    RECEIPT_KINDS,
    reorg_part,
    terminal_body,
    violation_body,
)
from watcher.delivery.plan import VIOLATION
from watcher.receipts.attestation import no_receipt_by_design
from watcher.store.errors import SettlementNotFound
from watcher.store.outbox_store import REVOCATION, DeliveryRecord, ReceiptRow
from watcher.store.receipts_store import receipt_store
from watcher.store.records import ReceiptRecord, SettlementRecord
from watcher.store.store import Store

RECEIPT_POLL_MS = 200
"""How often a body waiting for its receipt looks again."""

RECEIPT_LATE_POLL_MS = 5000
"""How often it looks again once ``receipt_wait_s`` has passed (it still waits: a commit or
discard never goes without its receipt)."""


class BodyAssembler:
    """Builds commit, discard and violation bodies from the store (see the module doc)."""

    def __init__(self, store: Store, receipt_wait_s: float) -> None:
        self.store = store
        self.outbox = store.outbox()
        self.receipts = receipt_store(store)
        self.receipt_wait_s = receipt_wait_s

    def receipt_deadline(self, rec: DeliveryRecord) -> int:
        """When a violation stops waiting for its revocation and goes without; a commit or
        discard goes on waiting for its receipt after it, looked at less often."""
        return self._decided_at(rec) + int(self.receipt_wait_s * 1000)

    def look_again_at(self, rec: DeliveryRecord, now: int) -> int:
        """When a row whose body is not ready yet (:meth:`assemble` gave None) is due again:
        every :data:`RECEIPT_POLL_MS` until :meth:`receipt_deadline` (and at it), then every
        :data:`RECEIPT_LATE_POLL_MS`."""
        deadline = self.receipt_deadline(rec)
        retry = (
            min(now + RECEIPT_POLL_MS, deadline) if now < deadline else now + RECEIPT_LATE_POLL_MS
        )
        return max(retry, now + 1)

    def _decided_at(self, rec: DeliveryRecord) -> int:
        if rec.event_id is not None:
            event = self.outbox.event(rec.event_id)
            if event is not None:
                return int(event[1])
        return rec.created_at

    def assemble(self, rec: DeliveryRecord, now: int) -> dict[str, Any] | None:
        """The body of a commit, discard or violation, or None while its receipt is not
        signed yet (a violation's revocation: while it is worth waiting for).

        The decision comes from the verdict's event (what was decided then, even if the
        settlement moved on); the receipt is the newest unrevoked one of the matching kind
        made for that decision (``Outbox.receipt_for``).
        """
        if rec.settlement_id is None:
            raise ValueError(f"delivery {rec.id}: no body and no settlement to build one from")
        try:
            settlement = self.store.settlement(rec.settlement_id)
        except SettlementNotFound:
            raise ValueError(f"delivery {rec.id}: settlement {rec.settlement_id} is gone") from None
        if rec.kind == VIOLATION:
            return self._assemble_violation(rec, settlement, now)
        event = self.outbox.event(rec.event_id) if rec.event_id is not None else None
        decision, decided_at = (event[0], event[1]) if event else (settlement.decision, 0)
        if "directive" not in decision:  # a deposit's deposit_confirmed: verdict and digest
            decision = settlement.decision
        kind = RECEIPT_KINDS.get(str(decision.get("verdict")))
        digest = decision.get("digest")
        receipt = None
        if kind is not None:
            receipt = self.outbox.receipt_for(
                rec.settlement_id, kind, str(digest) if digest else None, decided_at
            )
        none = None
        if kind is not None and receipt is None:
            none = self._none_by_design(settlement, decision)
            if none is None:
                return None  # never without its receipt (see the module doc)
        binding = None
        if settlement.dependent_state is not None:
            binding = self.outbox.receipt_for(rec.settlement_id, BINDING_RECEIPT_KIND, None, 0)
        return terminal_body(rec, settlement, decision, receipt, binding, none)

    def _none_by_design(self, settlement: SettlementRecord, decision: dict[str, Any]) -> str | None:
        """Why ``decision`` gets no receipt at all, by design (watcher/receipts/attestation.py
        ``no_receipt_by_design``), else None: its receipt is to be waited for."""
        chain = self.store.chain(settlement.chain)
        if chain is None:
            return None  # an off-chain source: its receipts are built like any other
        evidence = decision.get("evidence") or {}
        return no_receipt_by_design(
            chain.chain_id, settlement.kind, str(evidence.get("kind")), str(decision.get("verdict"))
        )

    def _assemble_violation(
        self, rec: DeliveryRecord, settlement: SettlementRecord, now: int
    ) -> dict[str, Any] | None:
        """The body of a ``finality_violation`` to a commit_url, or None while the signed
        revocation of the reversed decision's finality receipt is worth waiting for.

        The revoked receipt is the finality receipt made for the reversed decision (the one
        the commit carried); the revocation is the ``receipt_revocation`` citing it. The
        reorg is the one stored in the same transaction as the violation event."""
        sid = settlement.settlement_id
        event = self.outbox.event(rec.event_id) if rec.event_id is not None else None
        if event is None:
            raise ValueError(f"delivery {rec.id}: its finality_violation event is gone")
        payload, created_at = event
        previous_digest = (payload.get("previous") or {}).get("digest")
        stored = self.receipts.for_settlement(sid)
        revoked = next(
            (
                r
                for r in reversed(stored)
                if r.kind == RECEIPT_KINDS[Verdict.FINALITY_CONFIRMED]
                and r.body.get("decision_digest") == previous_digest
            ),
            None,
        )
        revocation = None
        if revoked is not None:
            revocation = next(
                (r for r in stored if r.kind == REVOCATION and r.revokes == revoked.id), None
            )
            if revocation is None and now < created_at + int(self.receipt_wait_s * 1000):
                return None
        binding = None
        if settlement.dependent_state is not None:
            binding = self.outbox.receipt_for(sid, BINDING_RECEIPT_KIND, None, 0)
        touched = [r for r in self.store.reorgs(settlement.chain) if sid in r.touched]
        reorg = next(
            (r for r in touched if r.detected_at == created_at),
            next((r for r in touched if r.detected_at <= created_at), None),
        )
        facts = ((payload.get("previous") or {}).get("evidence") or {}).get("facts") or {}
        block = {"number": facts.get("block_number"), "hash": facts.get("block_hash")}
        missing = (
            "no settlement_finality_receipt was signed for the reversed decision: nothing to revoke"
            if revoked is None
            else f"no signed receipt_revocation within {self.receipt_wait_s:g} s of the "
            f"violation; fetch it later from GET /v1/settlements/{sid}/receipts"
        )
        return violation_body(
            rec,
            settlement,
            {"id": rec.event_id, "payload": payload, "created_at": created_at},
            reorg_part(reorg, block if "block_number" in facts else None),
            _row(revoked),
            _row(revocation),
            binding,
            missing,
        )


def _row(record: ReceiptRecord | None) -> ReceiptRow | None:
    """A stored receipt in the shape bodies are made from."""
    return record  # the receipts table has one row type (ReceiptRow is ReceiptRecord)
