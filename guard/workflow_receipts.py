"""Offline check that a receipt is one of *this* workflow's four recorded elements.

:func:`guard.verify.verify_receipt` shows a receipt is well formed and signed; a caller
holding a workflow's receipt must also know it is about the workflow it has in mind and not
another one's (each is valid on its own). :func:`verify_workflow_receipt` adds that: the
kind is one of the four handoff elements and the handoff it records is the workflow's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from guard.errors import ReceiptInvalid
from guard.handoff_receipts import HANDOFF_KINDS
from guard.verify import VerifiedReceipt, verify_receipt
from guard.workflow_checkpoint import workflow_name


def verify_workflow_receipt(
    receipt: Mapping[str, Any],
    workflow_id: str,
    trusted_signers: Collection[str] | None = None,
) -> VerifiedReceipt:
    """Check ``receipt`` completely and that it is a recorded element of ``workflow_id``'s
    handoff; :class:`ReceiptInvalid` with the reason otherwise."""
    verified = verify_receipt(receipt, trusted_signers=trusted_signers)
    if verified.kind not in HANDOFF_KINDS or verified.handoff is None:
        raise ReceiptInvalid(f"kind: {verified.kind!r} is not a recorded element of a workflow")
    expected = workflow_name(workflow_id)
    name = verified.handoff.get("name")
    if name != expected:
        raise ReceiptInvalid(
            f"handoff.name: the receipt is about {name!r}, not workflow {workflow_id!r}"
        )
    return verified
