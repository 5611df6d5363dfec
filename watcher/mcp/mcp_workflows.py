"""The MCP tools of workflows: an agent's multi-step work handed off under the guard.

``start_workflow``, ``begin_step``, ``complete_step``, ``take_over_workflow``,
``get_workflow`` (and ``renew_workflow_lease``, ``release_workflow``: an agent over MCP has
no other way to keep or give up its lock). Each is one ``/v1/workflows`` request of the
client (:mod:`watcher.client.workflows`); ids and step names are sent as single path
segments. A refusal is a tool error carrying the daemon's line (``fencing_token: stale
(current 2)``), except a takeover while the lease is live: that is an answer
(``LOCK_NOT_HELD``) the model acts on. What to do on each answer is in the descriptions
(:mod:`watcher.mcp.descriptions`).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from watcher.client import workflows as wf
from watcher.mcp import descriptions as text
from watcher.mcp.mcp_backend import DaemonApi

Json = dict[str, Any]
WorkflowId = Annotated[str, Field(description="the workflow_id start_workflow returned")]
Step = Annotated[str, Field(description="one of the workflow's step names")]
Token = Annotated[int, Field(ge=1, description="your lock's fencing_token")]
Holder = Annotated[str, Field(min_length=1, description="your name, e.g. 'agent-b'")]
LeaseS = Annotated[float, Field(gt=0, description="seconds your lock lasts unless renewed")]


def _seg(value: str) -> str:
    return quote(value, safe="")


class WorkflowTools:
    """The workflow tools, bound to one daemon API."""

    def __init__(self, api: DaemonApi) -> None:
        self.api = api

    async def start_workflow(
        self,
        steps: Annotated[list[str], Field(min_length=1, description="step names, in order")],
        holder: Holder,
        lease_s: LeaseS,
        idempotent_steps: Annotated[
            list[str] | None, Field(description="steps safe to run twice")
        ] = None,
        reference: Annotated[str | None, Field(description="an id of the work")] = None,
    ) -> Json:
        return await self.api.workflow(
            wf.start(steps, holder, lease_s, idempotent_steps, reference)
        )

    async def begin_step(
        self,
        workflow_id: WorkflowId,
        step: Step,
        fencing_token: Token,
        operation: Annotated[str, Field(min_length=1, description="what the step does")],
        recovery: Annotated[
            dict[str, str] | None,
            Field(description='{"settlement_id": ...} or {"idempotency_key": ...}'),
        ] = None,
    ) -> Json:
        call = wf.begin(_seg(workflow_id), _seg(step), fencing_token, operation, recovery)
        return await self.api.workflow(call)

    async def complete_step(
        self,
        workflow_id: WorkflowId,
        step: Step,
        fencing_token: Token,
        side_effects: Annotated[Json | None, Field(description="what the step committed")] = None,
    ) -> Json:
        call = wf.complete(_seg(workflow_id), _seg(step), fencing_token, side_effects)
        return await self.api.workflow(call)

    async def take_over_workflow(
        self, workflow_id: WorkflowId, holder: Holder, lease_s: LeaseS
    ) -> Json:
        return await self.api.take_over(wf.take_over(_seg(workflow_id), holder, lease_s))

    async def get_workflow(self, workflow_id: WorkflowId) -> Json:
        return await self.api.workflow(wf.get(_seg(workflow_id)))

    async def renew_workflow_lease(self, workflow_id: WorkflowId, fencing_token: Token) -> Json:
        return await self.api.workflow(wf.renew(_seg(workflow_id), fencing_token))

    async def release_workflow(self, workflow_id: WorkflowId, fencing_token: Token) -> Json:
        return await self.api.workflow(wf.release(_seg(workflow_id), fencing_token))


def add_workflow_tools(server: MCPServer, api: DaemonApi) -> None:
    """Register the workflow tools on ``server``."""
    tools = WorkflowTools(api)
    writes = ToolAnnotations(destructive_hint=False, open_world_hint=False)
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    for fn, description, hints in (
        (tools.start_workflow, text.START_WORKFLOW, writes),
        (tools.begin_step, text.BEGIN_STEP, writes),
        (tools.complete_step, text.COMPLETE_STEP, writes),
        (tools.take_over_workflow, text.TAKE_OVER_WORKFLOW, writes),
        (tools.get_workflow, text.GET_WORKFLOW, reads),
        (tools.renew_workflow_lease, text.RENEW_WORKFLOW_LEASE, writes),
        (tools.release_workflow, text.RELEASE_WORKFLOW, writes),
    ):
        server.add_tool(fn, description=description, annotations=hints, structured_output=True)
