"""``GET /v1/settlements`` (a cursor-paginated listing) and ``POST /v1/settlements/batch``
(up to 1,000 registrations, transactions and payments or jobs alike, in one store
transaction, a result per item).

The cursor is the ``seq`` of the last settlement of a page, as an opaque string: the next page
starts strictly after it, so registrations and verdicts that change between two pages
never make a page repeat or skip a settlement.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from guard.payment import ADDRESS_KINDS, PAYMENT_KIND
from watcher.api.auth import Reader, Registrar
from watcher.api.cursors import CursorParam, cursor_seq
from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError, validation_body
from watcher.api.json_answer import JsonAnswer
from watcher.api.models.errors import ERRORS
from watcher.api.models.params import DIGITS_ONLY
from watcher.api.models.settlements import (
    MAX_PAGE,
    BatchItemResult,
    BatchRequest,
    BatchResponse,
    SettlementPage,
    SettlementRequest,
    Verdict,
)
from watcher.api.payments import checked_payment, parsed_payment, payment_view
from watcher.api.recorded_heads import HeadsOnce
from watcher.api.registration import checked_settlement, same_terms
from watcher.api.source_settlements import checked_source_settlement, source_view
from watcher.api.views import chain_settlement_view
from watcher.config.model import Config
from watcher.config.source_kinds import known_kinds
from watcher.store import NewSettlement, SettlementRecord
from watcher.store.listing_store import EVM_KIND, listing
from watcher.store.payment_records import NewPaymentSpec
from watcher.store.payments_store import PaymentConflict, spec_conflict


def settlement_kinds(config: Config) -> list[str]:
    """The kinds a settlement can have here (evm_tx, evm_payment, evm_deposit, the sources'
    and the installed source kinds): a filter naming another is a typo, not a kind with
    none."""
    return sorted({*known_kinds(), *ADDRESS_KINDS, *(s.kind for s in config.sources)})


def _kind_query(kinds: list[str]) -> Any:
    """The ``kind`` query parameter, its known values documented as its enum."""
    return Query(
        default=None,
        description="evm_tx, evm_payment, evm_deposit, a source's.",
        json_schema_extra={"enum": kinds},
    )


def _check_kind(kind: str | None, kinds: list[str]) -> None:
    """A 422 naming ``kind`` and the known kinds if ``kind`` is none of them."""
    if kind is not None and kind not in kinds:
        raise ApiError(
            422, f"kind: unknown kind {kind!r}; known kinds: {', '.join(kinds)}", fields=["kind"]
        )


def router(deps: ApiDeps) -> APIRouter:
    """The listing and batch routes over ``deps``."""
    api = APIRouter()
    kinds = settlement_kinds(deps.config)
    kind_query = _kind_query(kinds)  # a default, not an annotation: kinds is the router's

    @api.get(
        "/v1/settlements",
        response_model=SettlementPage,
        response_model_exclude_unset=True,
        responses={422: ERRORS[422]},
    )
    def list_settlements(
        caller: Reader,
        chain: Annotated[str | None, Query(description="Chain (or source) name.")] = None,
        verdict: Annotated[Verdict | None, Query()] = None,
        kind: str | None = kind_query,
        cursor: CursorParam = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE), DIGITS_ONLY] = 100,
    ) -> JSONResponse:
        """The caller's registered settlements, oldest first, a page at a time."""
        _check_kind(kind, kinds)
        filters = {"chain": chain, "verdict": verdict, "kind": kind, "owner": caller.name}
        records = listing(deps.store).page(after_seq=cursor_seq(cursor), limit=limit, **filters)
        last = records[-1].seq if len(records) == limit else None
        heads = HeadsOnce(deps.store)  # one head read for the page
        items = [_view(deps, rec, heads) for rec in records]  # as is: no 255-level limit
        return JsonAnswer({"items": items, "next_cursor": None if last is None else str(last)})

    @api.post(
        "/v1/settlements/batch",
        response_model=BatchResponse,
        response_model_exclude_unset=True,
        responses={422: ERRORS[422], 503: ERRORS[503]},
    )
    def register_batch(caller: Registrar, body: BatchRequest) -> JSONResponse:
        """Register up to 1,000 settlements (each a ``POST /v1/settlements`` body) in
        one store transaction. Each item gets its own result: 201 registered, 200 already
        registered (same id), or the 4xx it would get alone; invalid items store nothing and
        do not stop the valid ones."""
        results: list[dict[str, Any] | None] = []
        valid: list[tuple[int, NewSettlement]] = []
        specs: dict[int, NewPaymentSpec] = {}  # of the payment items, by index
        for index, item in enumerate(body.items):
            checked = _checked(deps, index, item, caller.name, specs)
            if isinstance(checked, BatchItemResult):
                results.append(checked.model_dump(exclude_unset=True))
            else:
                results.append(None)
                valid.append((index, checked))
        first = {new.settlement_id: specs[i] for i, new in reversed(valid) if i in specs}
        stored = listing(deps.store).register_batch([new for _, new in valid], first)
        _kick_sources(deps, [rec.chain for rec, created in stored if created])
        heads = HeadsOnce(deps.store)  # one head read for the batch, after its commit
        for one, (rec, created) in zip(valid, stored, strict=True):
            results[one[0]] = _stored_result(deps, one, rec, created, specs.get(one[0]), heads)
        # Plain dicts, as GET answers (the models document them): no validation round trip.
        return JsonAnswer({"results": [r for r in results if r is not None]})

    return api


def _stored_result(
    deps: ApiDeps,
    item: tuple[int, NewSettlement],
    rec: SettlementRecord,
    created: bool,
    spec: NewPaymentSpec | None,
    heads: HeadsOnce,
) -> dict[str, Any]:
    """The result of a stored item: 201, 200 (already registered), or 409 for a payment
    whose reference names a stored payment that differs, or any repeat with other terms."""
    index, new = item
    if spec is not None and not created:
        field = spec_conflict(deps.store.payment_spec(rec.settlement_id), rec.chain, spec)
        if field is not None:
            problem = PaymentConflict(rec.settlement_id, field)
            refused = _refused(index, ApiError(409, str(problem), fields=["reference", field]))
            return refused.model_dump(exclude_unset=True)
    if not created:
        try:
            same_terms(rec, new)
        except ApiError as exc:
            return _refused(index, exc).model_dump(exclude_unset=True)
    view = _view(deps, rec, heads)
    status = 201 if created else 200
    return {"index": index, "status": status, "settlement": view, "error": None, "fields": []}


def _refused(index: int, exc: ApiError) -> BatchItemResult:
    fields = exc.extra.get("fields")
    return BatchItemResult(
        index=index,
        status=exc.status,
        settlement=None,
        error=exc.message,
        fields=[str(f) for f in fields] if isinstance(fields, list) else [],
    )


def _checked(
    deps: ApiDeps, index: int, item: dict[str, Any], owner: str, specs: dict[int, NewPaymentSpec]
) -> NewSettlement | BatchItemResult:
    """One batch item checked as ``POST /v1/settlements`` checks it (as ``owner``'s), or its
    error result; a payment's spec goes into ``specs``."""
    if item.get("kind") == PAYMENT_KIND:
        try:
            payment, spec = checked_payment(deps, parsed_payment(item), owner)
        except ApiError as exc:
            return _refused(index, exc)
        specs[index] = spec
        return payment
    if item.get("kind", EVM_KIND) != EVM_KIND:
        new = checked_source_settlement(deps, item, owner)
        if not isinstance(new, tuple):
            return new
        answer, status = new
        fields = answer.get("fields")
        return BatchItemResult(
            index=index,
            status=status,
            settlement=None,
            error=str(answer.get("error")),
            fields=[str(f) for f in fields] if isinstance(fields, list) else [],
        )
    try:
        body = SettlementRequest.model_validate({k: v for k, v in item.items() if k != "kind"})
        return checked_settlement(deps, body, owner)
    except ValidationError as exc:
        answer = validation_body(exc.errors(include_url=False))
        return BatchItemResult(index=index, status=422, settlement=None, **answer)
    except ApiError as exc:
        return _refused(index, exc)


def _kick_sources(deps: ApiDeps, names: list[str]) -> None:
    """Poll the sources that just got new settlements now (as a single registration does)."""
    if deps.sources is None:
        return
    for name in dict.fromkeys(names):
        if name in deps.sources.slots:
            deps.sources.kick(name)


def _view(deps: ApiDeps, rec: SettlementRecord, heads: HeadsOnce) -> dict[str, Any]:
    """The settlement's view: payment, source or chain."""
    view = payment_view(deps, rec) or source_view(deps, rec)
    return view if view is not None else chain_settlement_view(deps, rec, heads)
