"""HTTP routes of the handoff between instances.

``GET /v1/handoffs``: every takeover, newest first: who handed what to whom, when, the
handoff guard's verdict, what recovery ran, and (``full=true``) the four recorded elements.
``GET /v1/handoffs/{id}``: one takeover with its elements and their signed receipts
(``receipts``: kind -> receipt, each checkable offline with ``finality verify``; null for a
record written before elements were signed). ``GET /v1/leases``: who owns what now, the live
instances (their liveness rows, shown apart from the leases) and the writes the store refused
for a stale fencing token.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from guard.handoff_receipts import HANDOFF_KINDS
from watcher.api.auth import Admin
from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError
from watcher.api.models.handoff import HandoffView, LeasesView
from watcher.api.models.params import DIGITS_ONLY, MAX_ID
from watcher.store import lease_store as ls


def signed_elements(elements: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    """The signed receipt of each recorded element (None where the record has only its
    digest: written before elements were signed)."""
    out: dict[str, dict[str, Any] | None] = {}
    for kind in HANDOFF_KINDS:
        element = elements.get(kind)
        out[kind] = element.get("receipt") if isinstance(element, dict) else None
    return out


def handoff_json(row: dict[str, Any], full: bool = False) -> dict[str, Any]:
    """A takeover record as the API shows it (``full``: with the recorded elements and
    their signed receipts)."""
    elements = row["elements"] if isinstance(row["elements"], dict) else {}
    receipts = signed_elements(elements)
    out = {
        "id": row["id"],
        "name": row["name"],
        "from_owner": row["from_owner"],
        "from_token": row["from_token"],
        "to_owner": row["to_owner"],
        "to_token": row["to_token"],
        "reason": row["reason"],
        "verdict": row["verdict"],
        "at": row["at"],
        "recovery": row["recovery"],
        "signed": all(r is not None for r in receipts.values()),
    }
    if full:
        out["elements"] = elements
        out["receipts"] = receipts
    return out


HandoffId = Annotated[
    int, Path(ge=1, le=MAX_ID, description="the takeover's id (GET /v1/handoffs)"), DIGITS_ONLY
]
"""The ``handoff_id`` path parameter."""


def router(deps: ApiDeps) -> APIRouter:
    """The handoff routes over ``deps``."""
    api = APIRouter()
    engine = deps.store.reader

    @api.get("/v1/handoffs", response_model=None, responses={200: {"model": list[HandoffView]}})
    def list_handoffs(
        caller: Admin,
        name: str | None = Query(default=None, description="only this chain or source"),
        limit: Annotated[int, Query(ge=1, le=1000), DIGITS_ONLY] = 100,
        full: bool = Query(
            default=False, description="include the four recorded elements and their receipts"
        ),
    ) -> Any:
        """Takeovers, newest first."""
        return [handoff_json(r, full) for r in ls.handoffs(engine, name, limit)]

    @api.get(
        "/v1/handoffs/{handoff_id}", response_model=None, responses={200: {"model": HandoffView}}
    )
    def get_handoff(
        caller: Admin,
        handoff_id: HandoffId,
    ) -> Any:
        """One takeover with its recorded elements and their signed receipts."""
        row = ls.handoff(engine, handoff_id)
        if row is None:
            raise ApiError(404, f"handoff_id: no handoff {handoff_id}", fields=["handoff_id"])
        return handoff_json(row, full=True)

    @api.get("/v1/leases", response_model=None, responses={200: {"model": LeasesView}})
    def list_leases(caller: Admin) -> Any:
        """Current leases, the live instances (liveness rows) with how many leases each
        holds, this instance's id and fair share, and the refused stale-token writes."""
        manager = deps.handoff
        now = deps.clock()
        held = [x for x in ls.leases(engine) if x.expires_at > now]
        return {
            "instance_id": manager.instance_id,
            "enabled": manager.enabled,
            "balance": manager.balance,
            "fair_share": manager.spread.fair if manager.spread is not None else None,
            "leases": [vars(x) for x in ls.leases(engine)],
            "instances": [
                {
                    "instance_id": x.owner,
                    "alive": x.expires_at > now,
                    "last_heartbeat": x.acquired_at,
                    "expires_at": x.expires_at,
                    "leases": sum(1 for h in held if h.owner == x.owner),
                }
                for x in ls.instances(engine)
            ],
            "refused_writes": ls.rejections(engine),
        }

    return api
