"""Every answer of a verification names the receipt the same way (guard.verify's
``VerifiedReceipt.identity``): the client's ``Verification.as_json``, ``finality verify
--json`` and the MCP ``verify_receipt`` tool, over a golden receipt vector."""

from __future__ import annotations

import json
from pathlib import Path

from guard.verify import verify_receipt
from watcher.cli.receipts import _verified_json
from watcher.client.offline import verify
from watcher.mcp.mcp_tools import verify_offline

VECTOR = json.loads(
    (Path(__file__).parents[1] / "vectors" / "receipts" / "finality_depth.json").read_text()
)


def test_the_three_answers_name_the_receipt_alike() -> None:
    receipt, signers = VECTOR["receipt"], VECTOR["trusted_signers"]
    verified = verify_receipt(receipt, trusted_signers=signers)
    identity = verified.identity()
    assert identity == {
        "kind": "settlement_finality_receipt",
        "settlement_id": receipt["settlement_id"],
        "chain_id": receipt["chain_id"],
        "tx_hash": receipt["tx_hash"],
        "verdict": "FINALITY_CONFIRMED",
        "signer": VECTOR["expected"]["signer"],
        "digest": VECTOR["expected"]["digest"],
    }
    answers = [
        verify(receipt, signers=signers).as_json(),
        _verified_json(verified, [], receipt),
        verify_offline(receipt, signers[0]),
    ]
    for answer in answers:
        assert answer == {**answer, "valid": True, **identity}
