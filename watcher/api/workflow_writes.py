"""Step writes, ``POST /v1/workflows/{id}/steps/{step}/begin|complete``, taken without the framework.

An agent makes two of these per step, one after another, so the daemon's cost per write
bounds how fast any agent's work moves. Over HTTP, FastAPI and Starlette's machinery (the
exception middlewares, the router's matching, the dependency solver, the body's second
reading) cost the daemon about as much CPU as the write itself. This pure ASGI layer,
installed just inside :class:`~watcher.api.body_limit.BodyLimit` (so inside
:class:`~watcher.api.guards.Guards` too: the ``Host`` and JSON-only checks, the body's size,
nesting and integer limits all still apply first), takes a step write whose request the
route would take: exactly that path (no query string), a valid bearer token holding
``register`` (the application's :class:`~watcher.api.auth.Callers`), a body the route's own
model accepts (decoded and validated as FastAPI does: ``json.loads`` then the model), side
effects within their bounds. It hands the write to the service's group writer
(:mod:`watcher.workflows.writer`) and answers what the route answers: the view (200), the
service's refusal in the API's error shape, or 503 when the store is unavailable.

Everything else goes to the application untouched, which answers it exactly as it always
did: no token or a bad one (401), a missing scope (403), a body the model refuses (422
naming the field), a daemon without workflows (503). So no input rule is written twice;
the bytes answered are the route's (a test compares them). The routes stay declared, so the
OpenAPI document is unchanged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from watcher.api.auth import Callers, Unauthenticated
from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError, error_response
from watcher.api.json_answer import JsonAnswer
from watcher.api.models.workflows import StepBegin, StepComplete
from watcher.api.registration import check_dependent_state
from watcher.store.errors import StoreUnavailable
from watcher.workflows.steps import WorkflowRefused
from watcher.workflows.writer import Write

_PATH = re.compile(r"/v1/workflows/([^/]{1,64})/steps/([^/]{1,64})/(begin|complete)")
"""A step write's path: the workflow id and the step (each as the route's ``Path`` bounds
them), and the move."""

_REGISTER = "register"


@dataclass
class WritesTaken:
    """How many step writes the layer took itself (the rest went to the application)."""

    taken: int = 0
    """Requests answered here since the application was built."""


class WorkflowWrites:
    """The ASGI layer taking step writes (see the module doc)."""

    def __init__(self, app: ASGIApp, deps: ApiDeps, callers: Callers, count: WritesTaken) -> None:
        self.app = app
        self.deps = deps
        self.callers = callers
        self.count = count
        self.limit_bytes = deps.config.delivery.max_dependent_state_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _step_write(scope) if scope["type"] == "http" else None
        flows = self.deps.workflows
        owner = None if match is None or flows is None else self._registrar(scope)
        if match is None or flows is None or owner is None:
            await self.app(scope, receive, send)
            return
        body, more = await _body(receive)
        workflow_id, step, move = match
        write = None if more else self._write(body, owner, workflow_id, step, move)
        if write is None:  # the route answers it (422 naming the field, 413), as ever
            await self.app(scope, _replay(body, more, receive), send)
            return
        self.count.taken += 1
        try:
            answer = await flows.steps.writer.run_async(workflow_id, write)
        except WorkflowRefused as exc:
            refused = error_response(exc.status, exc.message, fields=exc.fields, **exc.extra)
            await refused(scope, receive, send)
            return
        except StoreUnavailable as exc:  # as errors.install answers it
            down = error_response(503, f"store: unavailable: {exc.cause}", fields=[])
            await down(scope, receive, send)
            return
        await JsonAnswer(answer)(scope, receive, send)

    def _registrar(self, scope: Scope) -> str | None:
        """The caller's name when its token holds ``register``, else None."""
        authorization = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
                break
        try:
            caller = self.callers.identify(authorization)
        except Unauthenticated:
            return None
        return caller.name if _REGISTER in caller.scopes else None

    def _write(
        self, body: bytes, owner: str, workflow_id: str, step: str, move: str
    ) -> Write | None:
        """The service's write for the request, or None when the route would refuse it."""
        flows = self.deps.workflows
        assert flows is not None
        try:
            data: Any = json.loads(body)
            if move == "begin":
                begin = StepBegin.model_validate(data)
                recovery = None if begin.recovery is None else begin.recovery.as_json()
                return flows.steps.begin_write(
                    owner,
                    workflow_id,
                    step,
                    begin.fencing_token,
                    begin.operation,
                    recovery,
                )
            done = StepComplete.model_validate(data)
            if done.side_effects is not None:
                check_dependent_state(done.side_effects, self.limit_bytes, "side_effects")
        except (ValueError, ValidationError, ApiError):
            return None
        return flows.steps.complete_write(
            owner, workflow_id, step, done.fencing_token, done.side_effects
        )


def _step_write(scope: Scope) -> tuple[str, str, str] | None:
    """(workflow id, step, ``begin`` or ``complete``) of a ``POST`` to exactly a step
    write's path (no query string, no root path), else None."""
    if scope["method"] != "POST" or scope.get("query_string") or scope.get("root_path"):
        return None
    match = _PATH.fullmatch(scope["path"])
    if match is None:
        return None
    return match.group(1), match.group(2), match.group(3)


async def _body(receive: Receive) -> tuple[bytes, list[Message]]:
    """The body (BodyLimit has read it whole and replays it as one message); any messages
    after it that are not more body, to be replayed too."""
    message = await receive()
    if message["type"] != "http.request":
        return b"", [message]
    chunks = [message.get("body", b"")]
    while message.get("more_body", False):
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), [message]
        chunks.append(message.get("body", b""))
    return b"".join(chunks), []


def _replay(body: bytes, more: list[Message], receive: Receive) -> Receive:
    """A ``receive`` handing the application the body read already, then the real one."""
    queued: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
    if more:
        queued = list(more)  # a disconnect before the body ended: pass it on as it came

    async def replayed() -> Message:
        if queued:
            return queued.pop(0)
        return await receive()

    return replayed
