"""``/v1/workflows``: a caller's multi-step work under the handoff guard (docs/workflows.md).

Create a workflow (201; the same ``reference`` again: 200, the same workflow; a different
request under it: 409), begin and complete its steps under the lock's fencing token, renew
or release the lease, take over once it is released or lapsed (the guard's verdict, the
recovery of every in-flight step, the four signed receipts), read one or page through the
caller's own. Writes need the ``register`` scope, reads ``read``; another caller's
workflow is a 404. A write under any token but the current one is a 409
``fencing_token: stale (current N)`` and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Path, Query

from watcher.api.auth import Reader, Registrar
from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError
from watcher.api.json_answer import JsonAnswer
from watcher.api.json_write import JsonWrite
from watcher.api.models.errors import ERRORS
from watcher.api.models.params import CURSOR
from watcher.api.models.workflows import (
    Fenced,
    StepBegin,
    StepComplete,
    TakeOver,
    WorkflowCreate,
)
from watcher.api.registration import check_dependent_state
from watcher.workflows.service import MAX_PAGE, WorkflowService
from watcher.workflows.steps import WorkflowRefused
from watcher.workflows.writer import Write

WorkflowId = Annotated[str, Path(min_length=1, max_length=64, description="wf_...")]
StepName = Annotated[str, Path(min_length=1, max_length=64, description="A step's name.")]

_WRITE: dict[str, Any] = {
    "response_model": None,
    "responses": {404: ERRORS[404], 409: ERRORS[409], 422: ERRORS[422]},
}


def _answered(call: Callable[[], dict[str, Any]], status: int = 200) -> JsonAnswer:
    """``call()``'s answer (encoded by orjson: a view carries four signed receipts, and
    FastAPI's own encoding of a returned dict cost more than the write), its refusal
    answered in the API's error shape."""
    try:
        return JsonAnswer(call(), status_code=status)
    except WorkflowRefused as exc:
        raise ApiError(exc.status, exc.message, fields=exc.fields, **exc.extra) from None


def _served(deps: ApiDeps) -> Callable[[], WorkflowService]:
    """The workflow service, or the 503 of a daemon that does not serve workflows."""
    flows = deps.workflows

    def service() -> WorkflowService:
        if flows is None:
            raise ApiError(503, "workflows: not served by this daemon", fields=[])
        return flows

    return service


def install_writes(app: FastAPI, deps: ApiDeps) -> None:
    """Declare the step writes (``begin``, ``complete``) on ``app``'s own router, before every
    topic's router: matched before them, and answered by their route's own ASGI app
    (watcher/api/json_write.py), the body validated with the same models."""
    service = _served(deps)
    limit_bytes = deps.config.delivery.max_dependent_state_bytes

    async def begin_step(
        caller: Registrar, workflow_id: WorkflowId, step: StepName, body: StepBegin
    ) -> JsonAnswer:
        """Put a step in flight, with how its real state can be learned (``recovery``)."""
        recovery = None if body.recovery is None else body.recovery.as_json()
        flows = service()
        write = flows.steps.begin_write(
            caller.name, workflow_id, step, body.fencing_token, body.operation, recovery
        )
        return await _written(flows, workflow_id, write)

    async def complete_step(
        caller: Registrar, workflow_id: WorkflowId, step: StepName, body: StepComplete
    ) -> JsonAnswer:
        """Mark an in-flight step completed; the checkpoint records its side effects."""
        if body.side_effects is not None:
            check_dependent_state(body.side_effects, limit_bytes, "side_effects")
        flows = service()
        write = flows.steps.complete_write(
            caller.name, workflow_id, step, body.fencing_token, body.side_effects
        )
        return await _written(flows, workflow_id, write)

    for action, endpoint in (("begin", begin_step), ("complete", complete_step)):
        app.router.add_api_route(
            "/v1/workflows/{workflow_id}/steps/{step}/" + action,
            endpoint,
            methods=["POST"],
            route_class_override=JsonWrite,
            **_WRITE,
        )


def router(deps: ApiDeps) -> APIRouter:
    """The workflow routes over ``deps`` (the step writes: :func:`install_writes`)."""
    service = _served(deps)

    api = APIRouter()
    _step_routes(api, service)
    _lock_routes(api, service)
    return api


def _step_routes(api: APIRouter, service: Callable[[], WorkflowService]) -> None:
    """Create a workflow (its steps' writes: :func:`install_writes`)."""

    @api.post("/v1/workflows", status_code=201, **_WRITE)
    def create_workflow(caller: Registrar, body: WorkflowCreate) -> JsonAnswer:
        """Create a workflow held by ``holder``: the view and the holder's lock (token 1)."""
        try:
            view, created = service().create(
                caller.name,
                body.steps,
                body.holder,
                body.lease_s,
                body.idempotent_steps,
                body.reference,
            )
        except WorkflowRefused as exc:
            raise ApiError(exc.status, exc.message, fields=exc.fields, **exc.extra) from None
        return JsonAnswer(view, status_code=201 if created else 200)


async def _written(flows: WorkflowService, workflow_id: str, write: Write) -> JsonAnswer:
    """A step write's answer, awaited from the service's group writer (the event loop is
    not blocked, no worker thread is taken), its refusal in the API's error shape."""
    try:
        return JsonAnswer(await flows.steps.writer.run_async(workflow_id, write))
    except WorkflowRefused as exc:
        raise ApiError(exc.status, exc.message, fields=exc.fields, **exc.extra) from None


def _lock_routes(api: APIRouter, service: Callable[[], WorkflowService]) -> None:
    """Renew, release, take over; read one workflow or a page of them."""

    @api.post("/v1/workflows/{workflow_id}/lease", **_WRITE)
    def renew_lease(caller: Registrar, workflow_id: WorkflowId, body: Fenced) -> JsonAnswer:
        """Renew the lease for its length from now."""
        return _answered(lambda: service().renew(caller.name, workflow_id, body.fencing_token))

    @api.post("/v1/workflows/{workflow_id}/release", **_WRITE)
    def release_lease(caller: Registrar, workflow_id: WorkflowId, body: Fenced) -> JsonAnswer:
        """Hand off explicitly: a successor may take over at once."""
        return _answered(lambda: service().release(caller.name, workflow_id, body.fencing_token))

    @api.post("/v1/workflows/{workflow_id}/takeover", **_WRITE)
    def take_over(caller: Registrar, workflow_id: WorkflowId, body: TakeOver) -> JsonAnswer:
        """Take the lock once released or lapsed: verdict, directive, new fencing token,
        recovery of each in-flight step, the four receipts. Live lease: 409 LOCK_NOT_HELD."""
        return _answered(
            lambda: service().take_over(caller.name, workflow_id, body.holder, body.lease_s)
        )

    @api.get("/v1/workflows/{workflow_id}", response_model=None, responses={404: ERRORS[404]})
    def get_workflow(caller: Reader, workflow_id: WorkflowId) -> JsonAnswer:
        """One of the caller's workflows, its in-flight steps resolved now."""
        return _answered(lambda: service().view(service().record(caller.name, workflow_id)))

    @api.get("/v1/workflows", response_model=None, responses={422: ERRORS[422]})
    def list_workflows(
        caller: Reader,
        cursor: Annotated[
            str | None, Query(description="next_cursor of the previous page.", pattern=CURSOR)
        ] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    ) -> JsonAnswer:
        """The caller's workflows, oldest first, a page at a time."""
        after = 0 if cursor is None else int(cursor)
        return _answered(lambda: service().page(caller.name, after, limit))
