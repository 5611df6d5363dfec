"""Registering and showing off-chain source settlements (payment processors, job queues).

:func:`register_source_settlement` validates a ``POST /v1/settlements`` body whose ``kind``
is a source kind (``stripe_payment_intent``, ``rq_job``, ``celery_task``, or a plugin's) and
registers it: ``{"kind", "ref", "source"?, "timeout_s"?, "dependent_state"?,
"commit_url"?}``. ``source`` may be omitted when exactly one source of that kind is
configured. Answers as the chain registration does: 201 with the view, 200 with the same
settlement if it was registered already, 4xx naming the field.
"""

from __future__ import annotations

import math
from typing import Any

from guard.source import InvalidRef
from watcher.api.commit_url import check_commit_url
from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError, printable
from watcher.api.models.limits import lone_surrogate
from watcher.api.models.settlements import MIN_TIMEOUT_S
from watcher.api.registration import check_dependent_state, same_terms
from watcher.api.views import binding_for, latest_signed
from watcher.config.source_kinds import EVM_KIND
from watcher.settlements import ANONYMOUS_OWNER
from watcher.sources.poller import SourceSlot
from watcher.sources.settlements import new_source_settlement, source_settlement_view
from watcher.store import NewSettlement, SettlementRecord

FIELDS = ("kind", "ref", "source", "timeout_s", "dependent_state", "commit_url")
"""The keys a source registration accepts."""

Answer = tuple[dict[str, Any], int]
"""A JSON body and its HTTP status."""


class _Refused(Exception):
    def __init__(self, status: int, message: str, *fields: str, **extra: Any) -> None:
        super().__init__(message)
        self.answer: Answer = ({"error": message, "fields": list(fields), **extra}, status)


def register_source_settlement(
    deps: ApiDeps, body: dict[str, Any], owner: str = ANONYMOUS_OWNER
) -> Answer:
    """Validate and register a source settlement; returns (JSON body, HTTP status).

    Errors are ``({"error": "FIELD: what is wrong", "fields": [FIELD]}, 4xx)``: 422 for a
    bad field, 413 for dependent state over ``[delivery] max_dependent_state_bytes``.
    Nothing is stored unless the whole body is valid. The settlement is ``owner``'s."""
    new = checked_source_settlement(deps, body, owner)
    if isinstance(new, tuple):
        return new
    rec, created = deps.store.register(new)
    if not created:
        try:
            same_terms(rec, new)
        except ApiError as exc:
            return {"error": exc.message, **exc.extra}, exc.status
    if created and deps.sources is not None:
        deps.sources.kick(rec.chain)
    return _view(deps, rec), 201 if created else 200


def checked_source_settlement(
    deps: ApiDeps, body: dict[str, Any], owner: str = ANONYMOUS_OWNER
) -> NewSettlement | Answer:
    """The row a valid source registration stores, or its refusal (JSON body, 4xx status);
    nothing is stored here (the batch stores many rows in one transaction)."""
    try:
        slot, ref, timeout_s = _checked(deps, body)
    except _Refused as refused:
        return refused.answer
    return new_source_settlement(
        slot.config,
        ref,
        deps.clock(),
        timeout_s,
        body.get("dependent_state"),
        body.get("commit_url"),
        owner,
    )


def source_view(deps: ApiDeps, rec: SettlementRecord) -> dict[str, Any] | None:
    """The view of ``rec`` if it belongs to a configured source (None for a chain's): what
    ``GET /v1/settlements/{id}`` answers for a source settlement."""
    if deps.sources is None or rec.chain not in deps.sources.slots:
        return None
    return _view(deps, rec)


def _view(deps: ApiDeps, rec: SettlementRecord) -> dict[str, Any]:
    """The source view with the latest signed receipt, once one exists for its verdict."""
    receipt = latest_signed(deps, rec.settlement_id) if rec.verdict_enum.terminal else None
    return source_settlement_view(rec, receipt, binding_for(deps, rec), now=deps.clock())


def _checked(deps: ApiDeps, body: object) -> tuple[SourceSlot, str, float | None]:
    """The source, checked ref and capped timeout of a valid body; :class:`_Refused`."""
    if not isinstance(body, dict):
        raise _Refused(422, "body: must be a JSON object", "body")
    bad = next((k for k, v in body.items() if lone_surrogate(k) or lone_surrogate(v)), None)
    if bad is not None:  # not storable, nor even quotable in an answer
        name = printable(bad)
        raise _Refused(422, f"{name}: holds a lone surrogate (not UTF-8)", name)
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise _Refused(422, f"{unknown[0]}: unknown field (allowed: {', '.join(FIELDS)})", *unknown)
    slot = _slot(deps.sources.slots if deps.sources is not None else {}, body)
    if body.get("ref") is None:
        raise _Refused(422, "ref: is required", "ref")
    try:
        ref = slot.source.check_ref(body["ref"])
    except InvalidRef as exc:
        raise _Refused(422, str(exc), "ref") from None
    timeout_s = body.get("timeout_s")
    if timeout_s is not None:
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float):
            raise _Refused(422, "timeout_s: must be a number of seconds", "timeout_s")
        if not math.isfinite(timeout_s) or timeout_s < MIN_TIMEOUT_S:
            raise _Refused(422, "timeout_s: must be a finite number >= 1", "timeout_s")
        timeout_s = min(float(timeout_s), slot.config.max_wait_s)  # the policy caps it anyway
    state = body.get("dependent_state")
    if state is not None:
        try:
            check_dependent_state(state, deps.config.delivery.max_dependent_state_bytes)
        except ApiError as exc:
            extra = {k: v for k, v in exc.extra.items() if k != "fields"}
            raise _Refused(exc.status, exc.message, "dependent_state", **extra) from None
    commit_url = body.get("commit_url")
    if commit_url is not None and (
        not isinstance(commit_url, str) or not commit_url.startswith(("http://", "https://"))
    ):
        raise _Refused(422, "commit_url: must be an http:// or https:// URL", "commit_url")
    try:
        check_commit_url(deps, commit_url)
    except ApiError as exc:
        raise _Refused(exc.status, exc.message, "commit_url") from None
    return slot, ref, timeout_s


def _slot(slots: dict[str, SourceSlot], body: dict[str, Any]) -> SourceSlot:
    """The source a registration names (by ``source``, or as the only one of ``kind``)."""
    kind, source = body.get("kind"), body.get("source")
    configured = ", ".join(f"{n} ({s.config.kind})" for n, s in slots.items()) or "none"
    if not isinstance(kind, str):
        raise _Refused(422, "kind: is required (a string)", "kind")
    if kind == EVM_KIND:
        raise _Refused(
            422, "kind: evm_tx settlements are registered with chain and tx_hash", "kind"
        )
    if source is not None:
        if not isinstance(source, str) or source not in slots:
            raise _Refused(
                422,
                f"source: unknown source {source!r}; configured sources: {configured}",
                "source",
            )
        slot = slots[source]
        if slot.config.kind != kind:
            raise _Refused(
                422, f"source: {source!r} is a {slot.config.kind} source, not {kind}", "source"
            )
        return slot
    of_kind = [s for s in slots.values() if s.config.kind == kind]
    if not of_kind:
        raise _Refused(
            422, f"kind: no source of kind {kind!r} is configured (sources: {configured})", "kind"
        )
    if len(of_kind) > 1:
        names = ", ".join(s.config.name for s in of_kind)
        raise _Refused(
            422,
            f"source: is required: several sources of kind {kind} are configured ({names})",
            "source",
        )
    return of_kind[0]
