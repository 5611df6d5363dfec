"""The one error of consensus proofs: which check failed, and why."""

from __future__ import annotations

from guard.errors import GuardError

CHECKS = (
    "unknown network",
    "malformed",
    "unknown fork",
    "checkpoint mismatch",
    "committee branch",
    "missing committee",
    "signature",
    "participation",
    "finality branch",
    "execution branch",
    "no finality",
)
"""The names of the checks, as ``ConsensusProofError.check`` says them."""


class ConsensusProofError(GuardError, ValueError):
    """Light-client data that does not prove what it claims; ``check`` names the failed check
    (one of ``CHECKS``), the message says where (``signature: update 3 (signature slot …)``)."""

    def __init__(self, check: str, detail: str) -> None:
        super().__init__(f"{check}: {detail}")
        self.check = check
        self.detail = detail
