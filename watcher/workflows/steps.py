"""A workflow's steps and what a holder may do to them: pure functions over plain values.

A step is ``pending`` until its holder begins it (``in_flight``: the operation may have had
effects that nobody has confirmed yet), then ``completed`` with the side effects the holder
records. Nothing here reads the store or the clock: :mod:`watcher.workflows.service` locks
the row, calls these, and stores what they return; a refusal is a
:class:`WorkflowRefused` and leaves everything as it was.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from guard.canonical import canonical_json, digest
from guard.event_kinds import EventKind

PENDING = "pending"
IN_FLIGHT = "in_flight"
COMPLETED = "completed"

STEP_BEGUN = EventKind.WORKFLOW_STEP_BEGUN
STEP_COMPLETED = EventKind.WORKFLOW_STEP_COMPLETED
TAKEN_OVER = EventKind.WORKFLOW_TAKEN_OVER
LEASE_EXPIRED = EventKind.WORKFLOW_LEASE_EXPIRED


class WorkflowRefused(Exception):
    """A request the workflow refuses: an HTTP status, one line naming the field, extras."""

    def __init__(self, status: int, message: str, fields: list[str], **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.fields = fields
        self.extra = extra


def not_found(workflow_id: str) -> WorkflowRefused:
    """The refusal of a workflow id the caller has none of (unknown, or another's)."""
    return WorkflowRefused(404, f"workflow_id: no workflow {workflow_id!r}", ["workflow_id"])


def new_steps(names: list[str]) -> list[dict[str, Any]]:
    """The steps of a new workflow, all pending."""
    return [
        {"name": n, "state": PENDING, "operation": None, "recovery": None, "side_effects": None}
        for n in names
    ]


def steps_digest(steps: list[dict[str, Any]]) -> str:
    """The checkpoint's digest: ``sha256:`` of the steps' canonical JSON (guard/canonical.py,
    the bytes :func:`guard.canonical.digest` hashes), each step's text written once
    (:func:`_step_text`)."""
    try:
        texts = [_step_text(step) for step in steps]
    except (TypeError, orjson.JSONEncodeError):  # not plain JSON: the guard's own path
        return digest(steps)
    text = "[" + ",".join(texts) + "]"
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


_TEXTS: dict[bytes, str] = {}
"""A step's canonical text by its orjson bytes (keys sorted), for :func:`_step_text`."""
MAX_TEXTS = 4096
"""Most step texts kept (then all are dropped: the next writes write them again)."""
MAX_KEY_BYTES = 2048
"""A step longer than this (large side effects) is written each time, not kept."""


def _step_text(step: dict[str, Any]) -> str:
    """One step's canonical JSON text. Why kept: the checkpoint's digest covers every step
    but a write changes one, and the canonical writer (pure Python, every key sorted and
    every string checked) took ~0.1 ms for ten steps, the most expensive part of a step
    write. The key is the step's orjson encoding with sorted keys: equal bytes are the same
    JSON document with the same types (``1`` and ``1.0`` and ``true`` differ), so the same
    canonical text, or the same refusal, which is never kept (the canonical writer raises
    again)."""
    key = orjson.dumps(step, option=orjson.OPT_SORT_KEYS)
    text = _TEXTS.get(key)
    if text is None:
        text = canonical_json(step).decode("utf-8")
        if len(key) <= MAX_KEY_BYTES:
            if len(_TEXTS) >= MAX_TEXTS:
                _TEXTS.clear()
            _TEXTS[key] = text
    return text


def _index(steps: list[dict[str, Any]], name: str, workflow_id: str) -> int:
    for i, step in enumerate(steps):
        if step["name"] == name:
            return i
    known = ", ".join(s["name"] for s in steps)
    raise WorkflowRefused(
        404, f"step: workflow {workflow_id} has no step {name!r} (steps: {known})", ["step"]
    )


def begun(
    steps: list[dict[str, Any]],
    name: str,
    operation: str,
    recovery: dict[str, str] | None,
    workflow_id: str,
) -> list[dict[str, Any]]:
    """The steps with ``name`` in flight; refused unless it is pending (a second begin
    could be the re-run the guard exists to stop)."""
    i = _index(steps, name, workflow_id)
    state = steps[i]["state"]
    if state != PENDING:
        raise WorkflowRefused(
            409,
            f"step: {name!r} is already {state}; a step is begun once "
            "(take over and read its recovery instead of running it again)",
            ["step"],
            state=state,
        )
    changed = [dict(s) for s in steps]
    changed[i].update(state=IN_FLIGHT, operation=operation, recovery=recovery)
    return changed


def completed(
    steps: list[dict[str, Any]], name: str, side_effects: dict[str, Any] | None, workflow_id: str
) -> list[dict[str, Any]]:
    """The steps with ``name`` completed with its side effects; refused unless in flight."""
    i = _index(steps, name, workflow_id)
    state = steps[i]["state"]
    if state != IN_FLIGHT:
        why = "was never begun" if state == PENDING else "is already completed"
        raise WorkflowRefused(
            409, f"step: {name!r} {why}; only a step in flight completes", ["step"], state=state
        )
    changed = [dict(s) for s in steps]
    changed[i].update(state=COMPLETED, side_effects=side_effects or {})
    return changed


def check_token(workflow_id: str, given: int, current: int, lease_expires_at: int) -> None:
    """Refuse a write made under any token but the current one (a predecessor woken after a
    takeover), or after the holder released the lease."""
    if given != current:
        raise WorkflowRefused(
            409,
            f"fencing_token: stale (current {current})",
            ["fencing_token"],
            current_fencing_token=current,
        )
    if lease_expires_at == 0:
        raise WorkflowRefused(
            409,
            f"fencing_token: {given} was released; take over workflow {workflow_id} to write",
            ["fencing_token"],
            current_fencing_token=current,
        )
