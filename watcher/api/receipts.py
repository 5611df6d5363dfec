"""HTTP routes of the signed receipts.

* ``GET /v1/settlements/{id}/receipts``: every receipt of a settlement in order of issue
  (binding, decision receipts, revocations), each with its id, kind, digest, signer and
  ``revoked_by`` (the id of the revocation that withdrew it, or null).
* ``GET /v1/signers``: the signing addresses, current first, then the retired ones, so a
  receipt signed before a key rotation can still be checked against a published address.

The receipt parts of the settlement views are in :mod:`watcher.api.views`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from watcher.api.auth import Reader
from watcher.api.deps import ApiDeps
from watcher.api.models.views import ReceiptRecordView, SignerView
from watcher.api.views import settlement_or_error
from watcher.store.receipts_store import receipt_store


def router(deps: ApiDeps) -> APIRouter:
    """The receipts routes over ``deps``."""

    api = APIRouter()

    @api.get(
        "/v1/settlements/{settlement_id}/receipts",
        response_model=list[ReceiptRecordView],
        response_model_exclude_unset=True,
    )
    def list_receipts(caller: Reader, settlement_id: str) -> list[dict[str, Any]]:
        """Every signed receipt of a settlement, revocations included, in order of issue."""
        settlement_or_error(deps, settlement_id, caller.name)
        records = receipt_store(deps.store).for_settlement(settlement_id)
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

    @api.get("/v1/signers", response_model=list[SignerView], response_model_exclude_unset=True)
    def list_signers(caller: Reader) -> list[dict[str, Any]]:
        """Signing addresses: the current one (``retired_at`` null) first, then past ones."""
        return [
            {
                "address": s.address,
                "source": s.source,
                "first_used_at": s.first_used_at,
                "retired_at": s.retired_at,
                "current": s.retired_at is None,
            }
            for s in receipt_store(deps.store).signers()
        ]

    return api
