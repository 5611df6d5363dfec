"""Signed finality receipts over real L2 blocks, built by the watcher's receipt code and
checked by the offline verifier.

A real HTTP JSON-RPC server on loopback serves one real block (tests/vectors/real-blocks/)
as a node would: ``eth_getBlockByNumber``/``eth_getBlockByHash`` (hashes or full txs) and
``eth_getBlockReceipts``, single calls and batches. The daemon's
:class:`~watcher.receipts.builder.ReceiptBuilder` then builds the body of a
FINALITY_CONFIRMED decision for a tx of that block (headers fetched and re-hashed, both
tries rebuilt from the node's answers and checked against the header), the daemon's signer
signs it, and :func:`guard.verify.verify_receipt` checks it with nothing but the receipt.

The blocks: an OP Stack block, whose first (here only) tx is the L1-info deposit with its
post-Canyon receipt; an Arbitrum Sepolia block, whose first tx is ArbOS's internal tx (and
whose tx 5 reverted: its failure receipt is checked too); a mainnet block for comparison.
Before the L2 types were known no receipt could be issued for the OP block (its receipts
root did not rebuild) nor for the Arbitrum internal tx (the verifier refused 0x6a), and a
user tx of an Arbitrum block needed the node's raw bytes of every tx (its 0x6a object could
not be rebuilt): this node serves no ``eth_getRaw*`` method, and
the test asserts none is called.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from chains.rpc import RpcClient, Web3Transport
from guard.errors import ReceiptInvalid
from guard.settlement import (
    Evidence,
    Observation,
    Settlement,
    SettlementPolicy,
    decision_as_json,
    evaluate_settlement,
)
from guard.types import SettlementId, UnixMillis
from guard.verify import verify_receipt
from watcher.config.chains import ChainConfig
from watcher.receipts.builder import ReceiptBuilder
from watcher.receipts.signer import Signer
from watcher.store import SettlementRecord

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "real-blocks"
SIGNING_KEY = bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")
NOW = 1_800_000_000_000


class FixtureNode:
    """Answers JSON-RPC for one block, as the node that served it did."""

    def __init__(self, vector: dict[str, Any]) -> None:
        self.block: dict[str, Any] = vector["block"]
        self.receipts: list[dict[str, Any]] = vector["receipts"]
        self.calls: list[str] = []

    def _block(self, full: bool) -> dict[str, Any]:
        if full:
            return self.block
        return {**self.block, "transactions": [tx["hash"] for tx in self.block["transactions"]]}

    def answer(self, method: str, params: list[Any]) -> Any:
        self.calls.append(method)
        if method == "eth_chainId":
            return self.block["transactions"][0].get("chainId", "0x1")
        if method == "eth_getBlockByNumber":
            found = params[0] in (self.block["number"], "latest")
            return self._block(bool(params[1])) if found else None
        if method == "eth_getBlockByHash":
            return self._block(bool(params[1])) if params[0] == self.block["hash"] else None
        if method == "eth_getBlockReceipts":
            return (
                self.receipts if params[0] in (self.block["hash"], self.block["number"]) else None
            )
        raise LookupError(method)

    def reply(self, request: dict[str, Any]) -> dict[str, Any]:
        base = {"jsonrpc": "2.0", "id": request.get("id")}
        try:
            return {**base, "result": self.answer(request["method"], request.get("params", []))}
        except LookupError:
            return {**base, "error": {"code": -32601, "message": "the method does not exist"}}


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def start(node: FixtureNode) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                answer = (
                    [node.reply(r) for r in request]
                    if isinstance(request, list)
                    else node.reply(request)
                )
                body = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def decided_record(
    chain: str, block: dict[str, Any], index: int, reverted: bool = False
) -> SettlementRecord:
    """A settlement of the block's ``index``-th tx, decided by the guard at depth 1: final,
    or failed when its receipt says it reverted."""
    tx = block["transactions"][index]
    number = int(block["number"], 16)
    facts = {
        "block_hash": block["hash"],
        "block_number": number,
        "chain": chain,
        "confirmations": 1,
        "finality_mode": "depth",
        "finalized_number": None,
        "head_hash": block["hash"],
        "head_number": number,
        "required_confirmations": 1,
        "status": 0 if reverted else 1,
        "tx_hash": tx["hash"],
        "tx_index": index,
    }
    at = UnixMillis(NOW - 1000)
    observed = (
        Observation(failure=Evidence.of("reverted", at, basis="depth", **facts))
        if reverted
        else Observation(finality=Evidence.of("depth", at, **facts))
    )
    settlement = Settlement(SettlementId("stl_real_block"), True, UnixMillis(NOW - 5000), 60_000)
    decision = evaluate_settlement(
        settlement, observed, SettlementPolicy(max_wait_ms=86_400_000), at
    )
    verdict = decision.verdict.value
    assert verdict == ("SETTLEMENT_FAILED" if reverted else "FINALITY_CONFIRMED")
    return SettlementRecord(
        seq=1, settlement_id="stl_real_block", chain=chain, tx_hash=tx["hash"],
        required_confirmations=1, finality_mode="depth", timeout_ms=60_000,
        initiated_at=NOW - 5000, deadline=NOW + 55_000, verdict=verdict,
        watching=False, sender=tx["from"], nonce=None, block_number=number,
        block_hash=block["hash"], tx_index=index, receipt_status=facts["status"], replaced_by=None,
        replaced_block_number=None, replaced_block_hash=None, confirm_height=number,
        reorg_count=0, digest=decision.digest, decision=decision_as_json(decision),
        dependent_state={"order": "real-block"}, commit_url=None, next_probe_at=None,
        probe_count=0, created_at=NOW - 5000, updated_at=NOW - 1000, terminal_at=NOW - 1000,
        provisional=False, raw_tx=None,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("name", "chain_id", "index", "tx_type"),
    [
        ("op-stack-274", 10, 0, 0x7E),  # the L1-info deposit, post-Canyon receipt
        ("arbsep-185232421", 421614, 0, 0x6A),  # ArbOS's internal tx
        ("arbsep-185232421", 421614, 6, 0x2),  # a user's tx in the same L2 block
        ("eth-18000000", 1, 93, 0x2),  # mainnet, for comparison: the last of 94
    ],
)
def test_a_finality_receipt_for_a_tx_of_a_real_block_verifies_offline(
    name: str, chain_id: int, index: int, tx_type: int, serve: Any
) -> None:
    vector = json.loads((VECTORS / f"{name}.json").read_text())
    node = FixtureNode(vector)
    url = serve(node)
    block = vector["block"]
    config = ChainConfig(name="l2", chain_id=chain_id, rpc=[url], confirmations=1)
    signer = Signer(SIGNING_KEY, "env")
    builder = ReceiptBuilder(config, RpcClient(Web3Transport(url)), signer.address)
    record = decided_record("l2", block, index)

    receipt = signer.sign(builder.decision_body(record, NOW))

    verified = verify_receipt(receipt, trusted_signers=[signer.address])
    assert verified.kind == "settlement_finality_receipt"
    assert verified.tx_hash == block["transactions"][index]["hash"]
    facts = verified.facts
    assert (facts.block_hash, facts.tx_index, facts.status) == (block["hash"], index, 1)
    assert (facts.block_number, facts.confirmations) == (int(block["number"], 16), 1)
    assert int(block["transactions"][index]["type"], 16) == tx_type
    assert "eth_getBlockReceipts" in node.calls  # built from what the node served
    assert not [c for c in node.calls if "Raw" in c]  # every tx rebuilt from its object


def test_a_failure_receipt_for_a_reverted_tx_of_a_real_arbitrum_block_verifies_offline(
    serve: Any,
) -> None:
    """The Arbitrum Sepolia block's tx 5 reverted (status 0): the failure receipt proves it."""
    vector = json.loads((VECTORS / "arbsep-185232421.json").read_text())
    url = serve(FixtureNode(vector))
    config = ChainConfig(name="l2", chain_id=421614, rpc=[url], confirmations=1)
    signer = Signer(SIGNING_KEY, "env")
    builder = ReceiptBuilder(config, RpcClient(Web3Transport(url)), signer.address)
    record = decided_record("l2", vector["block"], 5, reverted=True)

    verified = verify_receipt(
        signer.sign(builder.decision_body(record, NOW)), trusted_signers=[signer.address]
    )
    assert (verified.kind, verified.verdict) == ("settlement_failure_receipt", "SETTLEMENT_FAILED")
    assert (verified.facts.tx_index, verified.facts.status) == (5, 0)


def test_a_tx_that_states_no_nonce_is_never_proof_of_a_replacement(serve: Any) -> None:
    """A deposit consumes no nonce of its sender's that it states: a failure receipt saying
    it replaced the watched tx is refused (before, with the watched tx's bytes unrecorded,
    it verified, the nonce reading "None")."""
    vector = json.loads((VECTORS / "op-stack-274.json").read_text())
    block = vector["block"]
    url = serve(FixtureNode(vector))
    config = ChainConfig(name="l2", chain_id=10, rpc=[url], confirmations=1)
    signer = Signer(SIGNING_KEY, "env")
    builder = ReceiptBuilder(config, RpcClient(Web3Transport(url)), signer.address)
    deposit = block["transactions"][0]
    number = int(block["number"], 16)
    facts = {
        "block_hash": block["hash"],
        "block_number": number,
        "head_hash": block["hash"],
        "head_number": number,
        "confirmations": 1,
        "replaced_by": deposit["hash"],
        "sender": deposit["from"],
    }
    at = UnixMillis(NOW - 1000)
    decision = evaluate_settlement(
        Settlement(SettlementId("stl_real_block"), True, UnixMillis(NOW - 5000), 60_000),
        Observation(failure=Evidence.of("replaced", at, basis="depth", **facts)),
        SettlementPolicy(max_wait_ms=86_400_000),
        at,
    )
    base = decided_record("l2", block, 0)
    record = dataclasses.replace(
        base,
        tx_hash="0x" + "77" * 32,  # the watched tx, never included
        verdict=decision.verdict.value,
        digest=decision.digest,
        decision=decision_as_json(decision),
        replaced_by=deposit["hash"],
        raw_tx=None,
    )
    receipt = signer.sign(builder.decision_body(record, NOW))
    with pytest.raises(ReceiptInvalid, match="a type 0x7e tx replaces none"):
        verify_receipt(receipt, trusted_signers=[signer.address])
