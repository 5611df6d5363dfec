"""``fetch_block`` against a scripted node through the transport seam, over a real store.

Every call one block needs is made before its transaction: the input it returns holds the
matches and the node's receipts, and nothing was written yet; a node that leaves a watched
tx's receipt out fails the block before any write; a block with no watched tx costs no
call at all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chains.block_facts import facts_of
from chains.models import Block
from chains.quorum import SingleNodeGate
from chains.rpc import RpcClient
from guard.settlement import SettlementPolicy
from watcher.config.chains import ChainConfig
from watcher.delivery.plan import OutboxPlan
from watcher.engine.apply import apply_block
from watcher.engine.fetch import ChainInconsistentReceipts, ChainSource, PollView, fetch_block
from watcher.engine.memory import ChainMemory
from watcher.engine.payments_fetch import PollTransfers
from watcher.engine.rules import ChainRules
from watcher.engine.tags import ChainTags
from watcher.settlements import Registration, register
from watcher.store import Store

CHAIN = "local"
NOW = 1_700_000_000_000
SENDER = "0x" + "11" * 20
WATCHED = "0x" + "ab" * 32
OTHER = "0x" + "cd" * 32


def bhash(n: int) -> str:
    return "0x" + f"{n:064x}"


class ScriptedNode:
    """A JSON-RPC transport over a few scripted blocks: block 2 holds ``WATCHED`` (reverted)
    and block 3 holds ``OTHER``; receipts are served by block hash."""

    endpoint = "scripted://node"

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.drop_receipts = False
        txs = {2: WATCHED, 3: OTHER}
        self.blocks: dict[int, dict[str, Any]] = {
            n: {
                "number": hex(n),
                "hash": bhash(n),
                "parentHash": bhash(n - 1),
                "timestamp": hex(1000 + n),
                "transactions": [self._tx(txs[n], n)] if n in txs else [],
            }
            for n in range(1, 4)
        }

    def _tx(self, tx_hash: str, n: int) -> dict[str, Any]:
        return {
            "hash": tx_hash,
            "from": SENDER,
            "nonce": hex(n),
            "to": None,
            "value": "0x0",
            "blockNumber": hex(n),
            "blockHash": bhash(n),
            "transactionIndex": "0x0",
        }

    def _receipts(self, block_hash: str) -> list[dict[str, Any]]:
        if self.drop_receipts:
            return []
        block = next(b for b in self.blocks.values() if b["hash"] == block_hash)
        return [
            {
                "transactionHash": tx["hash"],
                "blockNumber": block["number"],
                "blockHash": block_hash,
                "transactionIndex": "0x0",
                "status": "0x0",
            }
            for tx in block["transactions"]
        ]

    def _answer(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        self.requests.append(method)
        if method == "eth_getBlockByNumber":
            result: Any = self.blocks.get(int(params[0], 16))
        elif method == "eth_getBlockReceipts":
            result = self._receipts(params[0])
        else:
            raise AssertionError(f"unexpected {method}")
        return {"jsonrpc": "2.0", "id": 1, "result": result}

    def request(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        return self._answer(method, params)

    def batch(self, calls: Sequence[tuple[str, Sequence[Any]]]) -> list[Mapping[str, Any]]:
        return [self._answer(m, p) for m, p in calls]


@dataclass
class Setup:
    node: ScriptedNode
    client: RpcClient
    store: Store
    memory: ChainMemory
    source: ChainSource
    rules: ChainRules
    settlement_id: str

    def block(self, number: int) -> Block:
        block = self.client.block(number)
        assert block is not None
        self.node.requests.clear()
        return block

    def fetch(self, block: Block) -> Any:
        view = PollView(ChainTags(), block.header, PollTransfers())
        return fetch_block(self.source, self.memory, view, block, None, NOW)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    config = ChainConfig.model_validate(
        {"name": CHAIN, "chain_id": 31337, "rpc": ["http://127.0.0.1:9"], "confirmations": 3}
    )
    store = Store.open(f"sqlite:///{tmp_path / 'fetch.db'}")
    store.ensure_chain(CHAIN, 31337, NOW)
    rec, _ = register(store, Registration(config, WATCHED), NOW)
    node = ScriptedNode()
    client = RpcClient(node)
    memory = ChainMemory(CHAIN, store, config.resolved_header_window)
    memory.load()
    memory.load_new()
    source = ChainSource(CHAIN, store, client, facts_of(client), SingleNodeGate(node.endpoint))
    rules = ChainRules(config, SettlementPolicy(max_wait_ms=3_600_000), OutboxPlan(), False)
    try:
        yield Setup(node, client, store, memory, source, rules, rec.settlement_id)
    finally:
        store.close()


def test_the_input_holds_the_match_and_its_receipt_before_anything_is_written(
    setup: Setup,
) -> None:
    inp = setup.fetch(setup.block(2))
    assert [sid for sid, _ in inp.matches.matched] == [setup.settlement_id]
    assert inp.receipts[WATCHED].status == 0
    assert setup.node.requests == ["eth_getBlockReceipts"]  # one call, for the watched tx
    assert setup.store.settlement(setup.settlement_id).block_number is None
    assert setup.store.chain(CHAIN).head_number is None  # type: ignore[union-attr]
    with setup.store.block_txn(CHAIN, NOW) as txn:
        apply_block(txn, inp, setup.rules)
    assert setup.node.requests == ["eth_getBlockReceipts"]  # none inside the transaction
    stored = setup.store.settlement(setup.settlement_id)
    assert (stored.block_number, stored.receipt_status) == (2, 0)


def test_a_node_leaving_a_watched_receipt_out_fails_the_block_before_any_write(
    setup: Setup,
) -> None:
    block = setup.block(2)
    setup.node.drop_receipts = True
    with pytest.raises(ChainInconsistentReceipts, match="without receipts"):
        setup.fetch(block)
    assert setup.store.settlement(setup.settlement_id).block_number is None


def test_a_block_without_a_watched_tx_costs_no_call(setup: Setup) -> None:
    inp = setup.fetch(setup.block(3))
    assert inp.matches.matched == [] and dict(inp.receipts) == {}
    assert setup.node.requests == []
