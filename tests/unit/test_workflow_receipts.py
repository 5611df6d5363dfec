"""A workflow's checkpoint element, checked offline: each fault named even when the receipt
is signed again around it (so the element's own checks are what refuses it), and a receipt
of one workflow refused as another's."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from guard.canonical import digest
from guard.errors import ReceiptInvalid
from guard.handoff_receipts import CHECKPOINT, Takeover, handoff_body
from guard.verify import verify_receipt
from guard.workflow_receipts import verify_workflow_receipt
from tests.integration.receipts_helpers import SIGNING_KEY
from watcher.receipts.signer import Signer

SIGNER = Signer(SIGNING_KEY, "env")
STEPS: list[dict[str, Any]] = [
    {
        "name": "charge",
        "state": "completed",
        "operation": "charge card",
        "recovery": {"settlement_id": "stl_1"},
        "side_effects": {"charge_id": "ch_1"},
    },
    {
        "name": "ship",
        "state": "in_flight",
        "operation": "ship",
        "recovery": None,
        "side_effects": None,
    },
    {
        "name": "notify",
        "state": "pending",
        "operation": None,
        "recovery": None,
        "side_effects": None,
    },
]


def checkpoint(**changes: Any) -> dict[str, Any]:
    element = {
        "name": "workflow:wf_a",
        "kind": "workflow",
        "workflow_id": "wf_a",
        "reference": "order-812",
        "steps": copy.deepcopy(STEPS),
        "idempotent_steps": ["notify"],
        "steps_digest": digest(STEPS),
    }
    element.update(changes)
    return element


def signed(element: dict[str, Any], name: str = "workflow:wf_a") -> dict[str, Any]:
    takeover = Takeover(
        name=name,
        chain_id=0,
        from_owner="agent-a",
        from_token=1,
        to_owner="agent-b",
        to_token=2,
        reason="expired",
        at=1_700_000_000_000,
        verdict="IN_FLIGHT_UNTRACKED",
        decision_digest=digest({"any": "decision"}),
    )
    body = handoff_body(CHECKPOINT, takeover, element, SIGNER.address, takeover.at)
    return SIGNER.sign(body)


def test_a_workflow_checkpoint_verifies_and_says_what_it_shows() -> None:
    verified = verify_workflow_receipt(signed(checkpoint()), "wf_a", [SIGNER.address])
    assert verified.handoff is not None and verified.handoff["to_token"] == 2
    assert "1/3 step(s) completed, 1 in flight" in verified.facts.summary


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"steps_digest": digest([])}, "element.steps_digest: "),
        ({"steps": [*STEPS, STEPS[0]]}, "element.steps: a step name is listed twice"),
        ({"idempotent_steps": ["refund"]}, "element.idempotent_steps: 'refund' is not a step"),
        ({"workflow_id": "wf_b"}, "element.name: "),
        ({"steps": []}, "element.steps: "),
        ({"extra": 1}, "element.extra: is not a field of this receipt"),
    ],
)
def test_each_fault_of_a_checkpoint_is_named(changes: dict[str, Any], reason: str) -> None:
    element = checkpoint(**changes)
    if "steps" in changes and "steps_digest" not in changes:
        element["steps_digest"] = digest(element["steps"])  # only the named fault remains
    with pytest.raises(ReceiptInvalid) as refused:
        verify_receipt(signed(element))
    assert refused.value.reason.startswith(reason), refused.value.reason


def test_a_bad_step_state_is_named() -> None:
    steps = copy.deepcopy(STEPS)
    steps[1]["state"] = "maybe"
    with pytest.raises(ReceiptInvalid) as refused:
        verify_receipt(signed(checkpoint(steps=steps, steps_digest=digest(steps))))
    assert refused.value.reason.startswith("element.steps[1].state: 'maybe'")


def test_a_receipt_of_one_workflow_is_refused_as_another() -> None:
    receipt = signed(checkpoint())
    with pytest.raises(ReceiptInvalid) as refused:
        verify_workflow_receipt(receipt, "wf_b")
    assert refused.value.reason == (
        "handoff.name: the receipt is about 'workflow:wf_a', not workflow 'wf_b'"
    )
