"""The checkpoint of a caller's workflow, as one recorded element of its handoff receipts.

A workflow (a caller's named list of steps, each ``pending``, ``in_flight`` or
``completed``) is handed between agents under the same guard as the watcher's own work
(:mod:`guard.handoff`); its four recorded elements are signed as handoff receipts
(:mod:`guard.handoff_receipts`) whose handoff ``name`` is ``workflow:{workflow_id}``. Only
the checkpoint differs from a chain's: it is the steps themselves (name, state, operation,
recovery, side effects) and the ``sha256:`` digest of their canonical JSON, so a verifier
sees exactly which steps were done, with which effects, when the lock changed hands.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guard.errors import ReceiptInvalid
from guard.fields import array, digest_of, field, keys, obj, strings, text

WORKFLOW_PREFIX = "workflow:"
"""A workflow's handoff name is this prefix and its id."""
WORKFLOW_KIND = "workflow"
"""The checkpoint element's ``kind`` for a workflow (a chain's is ``chain``)."""
STEP_STATES = ("pending", "in_flight", "completed")
"""The states a step is in, in the order it moves through them."""
WORKFLOW_CHECKPOINT_FIELDS = (
    "name",
    "kind",
    "workflow_id",
    "reference",
    "steps",
    "idempotent_steps",
    "steps_digest",
)
"""Fields of a workflow's checkpoint element."""
STEP_FIELDS = ("name", "state", "operation", "recovery", "side_effects")
"""Fields of one step."""


def workflow_name(workflow_id: str) -> str:
    """The handoff name (receipts' ``chain``) of a workflow."""
    return f"{WORKFLOW_PREFIX}{workflow_id}"


def verify_workflow_checkpoint(element: Mapping[str, Any]) -> tuple[str, list[str]]:
    """Check a workflow checkpoint element; (what it shows, what rests on the signer's word).
    :class:`ReceiptInvalid` on the first fault."""
    keys(element, WORKFLOW_CHECKPOINT_FIELDS, "element")
    workflow_id = text(element, "workflow_id", "element")
    name = text(element, "name", "element")
    if name != workflow_name(workflow_id):
        raise ReceiptInvalid(
            f"element.name: {name!r} is not the name of workflow {workflow_id!r} "
            f"({workflow_name(workflow_id)!r})"
        )
    reference = field(element, "reference", "element")
    if reference is not None and not isinstance(reference, str):
        raise ReceiptInvalid("element.reference: must be a string or null")
    steps = array(element, "steps", "element", min_length=1)
    names: list[str] = []
    for i, value in enumerate(steps):
        where = f"element.steps[{i}]"
        step = obj(value, where)
        keys(step, STEP_FIELDS, where)
        names.append(text(step, "name", where))
        state = text(step, "state", where)
        if state not in STEP_STATES:
            raise ReceiptInvalid(f"{where}.state: {state!r} is not one of {STEP_STATES}")
        for key in ("operation", "recovery", "side_effects"):
            field(step, key, where)
    if len(set(names)) != len(names):
        raise ReceiptInvalid("element.steps: a step name is listed twice")
    unknown = set(strings(element, "idempotent_steps", "element")) - set(names)
    if unknown:
        raise ReceiptInvalid(f"element.idempotent_steps: {sorted(unknown)[0]!r} is not a step")
    digest_of(element, "steps_digest", "element", steps, "steps")
    done = sum(1 for s in steps if s["state"] == "completed")
    flying = sum(1 for s in steps if s["state"] == "in_flight")
    return (
        f"checkpoint of workflow {workflow_id}: {done}/{len(steps)} step(s) completed, "
        f"{flying} in flight",
        [
            "the steps and their side effects are what the workflow's holders recorded through "
            "the watcher: the signer's word that they were recorded, the holders' that they "
            "happened"
        ],
    )
