"""HTTP routes of the signed receipts, and the receipt parts of the settlement routes.

* ``GET /v1/settlements/{id}/receipts``: every receipt of a settlement in order of issue
  (binding, decision receipts, revocations), each with its id, kind, digest, signer and
  ``revoked_by`` (the id of the revocation that withdrew it, or null).
* ``GET /v1/signers``: the signing addresses, current first, then the retired ones, so a
  receipt signed before a key rotation can still be checked against a published address.

The settlement routes in watcher/api.py use :func:`latest_signed`, :func:`wait_signed` and
:func:`view_parts` from here.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter

from watcher.receipts import binding_for, issuer_of
from watcher.store import SettlementNotFound, SettlementRecord
from watcher.store.receipts_store import receipt_store

if TYPE_CHECKING:
    from watcher.app import Service

RECEIPT_WAIT_S = 3.0
"""How long ``GET …/receipt`` waits for the receipt of a verdict that just committed."""


def latest_signed(service: Service, settlement_id: str) -> dict[str, Any] | None:
    """The latest decision receipt no revocation withdraws (None if not signed yet)."""
    record = receipt_store(service.store).latest(settlement_id)
    return None if record is None else record.body


def wait_signed(service: Service, rec: SettlementRecord) -> dict[str, Any] | None:
    """:func:`latest_signed`, waiting briefly when the verdict is terminal: the receipt is
    built right after the verdict commits, by the receipts thread."""
    deadline = time.monotonic() + RECEIPT_WAIT_S
    while True:
        receipt = latest_signed(service, rec.settlement_id)
        if receipt is not None or issuer_of(service) is None or time.monotonic() > deadline:
            return receipt
        time.sleep(0.05)


def view_parts(service: Service, rec: SettlementRecord) -> dict[str, Any]:
    """The ``receipt`` and ``binding`` arguments of ``settlement_view`` for ``rec``."""
    receipt = None
    if rec.verdict in ("FINALITY_CONFIRMED", "SETTLEMENT_FAILED", "TIMEOUT_TREATED_AS_FAILURE"):
        receipt = latest_signed(service, rec.settlement_id)
    binding = binding_for(service, rec) if rec.dependent_state is not None else None
    return {"receipt": receipt, "binding": binding}


def router(service: Service) -> APIRouter:
    """The receipts routes."""
    from watcher.api import ApiError

    api = APIRouter()

    @api.get("/v1/settlements/{settlement_id}/receipts")
    def list_receipts(settlement_id: str) -> list[dict[str, Any]]:
        """Every signed receipt of a settlement, revocations included, in order of issue."""
        try:
            service.store.settlement(settlement_id)
        except SettlementNotFound:
            raise ApiError(404, f"settlement_id: no settlement {settlement_id!r}") from None
        records = receipt_store(service.store).for_settlement(settlement_id)
        revoked_by = {r.revokes: r.id for r in records if r.revokes is not None}
        return [
            {
                "id": r.id,
                "kind": r.kind,
                "digest": r.digest,
                "signer": r.signer,
                "created_at": r.created_at,
                "revokes": r.revokes,
                "revoked_by": revoked_by.get(r.id),
                "receipt": r.body,
            }
            for r in records
        ]

    @api.get("/v1/signers")
    def list_signers() -> list[dict[str, Any]]:
        """Signing addresses: the current one (``retired_at`` null) first, then past ones."""
        return [
            {
                "address": s.address,
                "source": s.source,
                "first_used_at": s.first_used_at,
                "retired_at": s.retired_at,
                "current": s.retired_at is None,
            }
            for s in receipt_store(service.store).signers()
        ]

    return api
