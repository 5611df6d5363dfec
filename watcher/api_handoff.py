"""HTTP routes of the handoff between instances.

``GET /v1/handoffs``: every takeover, newest first: who handed what to whom, when, the
handoff guard's verdict, the recorded elements and what recovery ran. ``GET /v1/leases``:
who owns what now, and the writes the store refused for a stale fencing token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query

from watcher.store import lease_store as ls

if TYPE_CHECKING:
    from watcher.service import Service


def handoff_json(row: dict[str, Any], full: bool = False) -> dict[str, Any]:
    """A takeover record as the API shows it (``full``: with the recorded elements)."""
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
    }
    if full:
        out["elements"] = row["elements"]
    return out


def router(service: Service) -> APIRouter:
    """The handoff routes bound to ``service``."""
    api = APIRouter()
    engine = service.store.reader

    @api.get("/v1/handoffs", response_model=list[dict[str, Any]])
    def list_handoffs(
        name: str | None = Query(default=None, description="only this chain or source"),
        limit: int = Query(default=100, ge=1, le=1000),
        full: bool = Query(default=False, description="include the four recorded elements"),
    ) -> Any:
        """Takeovers, newest first."""
        return [handoff_json(r, full) for r in ls.handoffs(engine, name, limit)]

    @api.get("/v1/leases", response_model=dict[str, Any])
    def list_leases() -> Any:
        """Current leases, this instance's id, and the refused stale-token writes."""
        return {
            "instance_id": service.handoff.instance_id,
            "enabled": service.handoff.enabled,
            "leases": [vars(x) for x in ls.leases(engine)],
            "refused_writes": ls.rejections(engine),
        }

    return api
