"""The ``/v1/workflows`` calls of the client, shared by the blocking and the async one.

Each function returns the request (method, path, JSON body) of one route, so that
:class:`~watcher.client.FinalityClient` and :class:`~watcher.client.AsyncFinalityClient`
say the same thing with one line each; :func:`verify_workflow` checks a workflow's receipt
offline, and that it is this workflow's (a receipt of another workflow is refused).
docs/workflows.md walks through them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from watcher.client.offline import Verification

Call = tuple[str, str, dict[str, Any]]
"""(method, path, keyword arguments of ``request``)."""


def _fenced(fencing_token: int, **fields: Any) -> dict[str, Any]:
    body = {"fencing_token": fencing_token}
    body.update({k: v for k, v in fields.items() if v is not None})
    return {"json": body}


def start(
    steps: Sequence[str],
    holder: str,
    lease_s: float,
    idempotent_steps: Sequence[str] | None = None,
    reference: str | None = None,
) -> Call:
    """``POST /v1/workflows``."""
    body: dict[str, Any] = {"steps": list(steps), "holder": holder, "lease_s": lease_s}
    if idempotent_steps:
        body["idempotent_steps"] = list(idempotent_steps)
    if reference is not None:
        body["reference"] = reference
    return "POST", "/v1/workflows", {"json": body}


def begin(
    workflow_id: str,
    step: str,
    fencing_token: int,
    operation: str,
    recovery: Mapping[str, str] | None = None,
) -> Call:
    """``POST /v1/workflows/{id}/steps/{step}/begin``."""
    extra = {"operation": operation, "recovery": None if recovery is None else dict(recovery)}
    return (
        "POST",
        f"/v1/workflows/{workflow_id}/steps/{step}/begin",
        _fenced(fencing_token, **extra),
    )


def complete(
    workflow_id: str, step: str, fencing_token: int, side_effects: Mapping[str, Any] | None
) -> Call:
    """``POST /v1/workflows/{id}/steps/{step}/complete``."""
    effects = None if side_effects is None else dict(side_effects)
    path = f"/v1/workflows/{workflow_id}/steps/{step}/complete"
    return "POST", path, _fenced(fencing_token, side_effects=effects)


def renew(workflow_id: str, fencing_token: int) -> Call:
    """``POST /v1/workflows/{id}/lease``."""
    return "POST", f"/v1/workflows/{workflow_id}/lease", _fenced(fencing_token)


def release(workflow_id: str, fencing_token: int) -> Call:
    """``POST /v1/workflows/{id}/release``."""
    return "POST", f"/v1/workflows/{workflow_id}/release", _fenced(fencing_token)


def take_over(workflow_id: str, holder: str, lease_s: float) -> Call:
    """``POST /v1/workflows/{id}/takeover``."""
    body = {"holder": holder, "lease_s": lease_s}
    return "POST", f"/v1/workflows/{workflow_id}/takeover", {"json": body}


def get(workflow_id: str) -> Call:
    """``GET /v1/workflows/{id}``."""
    return "GET", f"/v1/workflows/{workflow_id}", {}


def page(cursor: str | None = None, limit: int | None = None) -> Call:
    """``GET /v1/workflows``."""
    params = {k: v for k, v in (("cursor", cursor), ("limit", limit)) if v is not None}
    return "GET", "/v1/workflows", {"params": params}


def verify_workflow(
    receipt: Mapping[str, Any], workflow_id: str, *, signers: Sequence[str] | None = None
) -> Verification:
    """Check one of a workflow's four receipts offline, and that it is ``workflow_id``'s:
    ``valid=False`` with the reason otherwise (a valid receipt of another workflow too)."""
    from guard.errors import GuardError, ReceiptInvalid
    from guard.hexes import parse_address
    from guard.workflow_receipts import verify_workflow_receipt

    try:
        trusted = None if signers is None else [str(parse_address(s, "signer")) for s in signers]
    except GuardError as exc:
        return Verification(False, f"signer: {exc}")
    try:
        return Verification(True, receipt=verify_workflow_receipt(receipt, workflow_id, trusted))
    except ReceiptInvalid as exc:
        return Verification(False, exc.reason)
