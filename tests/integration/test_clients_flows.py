"""The core flows against two more node implementations, unchanged: Hardhat 3 (EDR) and
Ganache 7.9.2, both real nodes from npm, no proxy in between.

Neither offers ``eth_getBlockReceipts`` nor ``eth_getRawTransactionByHash`` (Hardhat answers
-32004 "not supported", Ganache -32700 "does not exist/is not available"): before capability
detection one such answer aborted every poll, the head stayed where it was and nothing was
ever decided. Each flow here is what a user runs: confirm, a tx registered while pending,
a revert with its failure receipt, a reorg, a replacement, a receipt verified offline.

Reorgs: neither node has ``anvil_reorg``; a reorg is ``evm_revert`` to a snapshot and a
different branch mined from there (:meth:`tests.support.devnode.DevNode.reorg_from`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import pytest

from chains.proofs import ProofUnavailable
from guard.hashing import keccak256
from guard.verify import verify_receipt
from tests.integration.receipts_helpers import receipts_for
from tests.support.anvil import Anvil, in_ci
from tests.support.devnode import DevNode
from tests.support.ganache import Ganache, ganache_installed
from tests.support.hardhat import Hardhat, hardhat_installed
from tests.support.rigs import Rig, RigFactory
from watcher.receipts.builder import ReceiptBuilder

pytestmark = pytest.mark.anvil

AWAITING, CONFIRMED, FAILED = "AWAITING_FINALITY", "FINALITY_CONFIRMED", "SETTLEMENT_FAILED"
GWEI = 10**9
NODES = {"hardhat": (Hardhat, hardhat_installed), "ganache": (Ganache, ganache_installed)}


@pytest.fixture(scope="module", params=list(NODES))
def shared_node(request: pytest.FixtureRequest) -> Iterator[DevNode]:
    """One Hardhat or Ganache node (automining) for the module's tests, killed at its end:
    each start costs Node.js about a second of CPU."""
    cls, installed = NODES[request.param]
    if not installed():
        if in_ci():
            pytest.fail(f"{request.param} is required under CI=true (scripts/bootstrap.sh)")
        pytest.skip(f"{request.param} not installed")
    with cls() as started:
        yield started


@pytest.fixture
def node(shared_node: DevNode) -> Iterator[DevNode]:
    """The module's node as a fresh one would be: the state each test starts from (no block
    of another test, every nonce 0, automining) is restored after it by ``evm_revert``."""
    start = shared_node.snapshot()
    yield shared_node
    shared_node.restore(start)


@pytest.fixture
def rig(node: DevNode, make_rig: RigFactory) -> Rig:
    """A watcher on SQLite following ``node`` (3 confirmations), first poll done."""
    # The rig is typed for anvil; it only uses what every DevNode has (url, mine).
    return make_rig(cast(Anvil, node), chain_id=node.chain_id, poll=True)


def _asked_once(rig: Rig, *methods: str) -> None:
    """Each of ``methods`` was asked at most once: the node said it lacks it, and it was not
    asked again (the engine may need none of it: it rebuilds what it can locally)."""
    lacking = rig.client.capabilities.lacking(rig.client.endpoint)
    for method in methods:
        assert rig.client.calls[method] == (1 if method in lacking else 0), method
    assert rig.client.calls["eth_getBlockReceipts"] == 1


def test_confirms_and_follows_the_node_head(rig: Rig, node: DevNode) -> None:
    tx = node.send()
    block = int(node.receipt(tx)["blockNumber"], 16)
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()
    assert (rig.view(sid)["verdict"], rig.view(sid)["block_number"]) == (AWAITING, block)

    rig.mine_and_poll(2)
    view = rig.view(sid)
    assert (view["verdict"], view["confirmations"]) == (CONFIRMED, 3)
    assert rig.watcher.head is not None and rig.watcher.head.number == node.head()

    receipts = receipts_for(rig)
    receipts.run(rig)
    verified = verify_receipt(receipts.latest(sid), trusted_signers=[receipts.signer.address])
    assert verified.kind == "settlement_finality_receipt"
    assert (verified.tx_hash, verified.facts.block_number) == (tx, block)
    _asked_once(rig, "eth_getBlockReceipts")


def test_a_tx_registered_after_its_block_was_followed_costs_no_lookup(
    rig: Rig, node: DevNode
) -> None:
    """The tracker fetched the tx's block whole while nothing watched it: registered by hash
    then, the tx is taken from that block's tx objects as this node serves them (no
    ``eth_getTransactionByHash``), and followed to a receipt that verifies."""
    tx = node.send()
    block = int(node.receipt(tx)["blockNumber"], 16)
    rig.watcher.poll()  # the block is followed before the registration
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()
    assert (rig.view(sid)["verdict"], rig.view(sid)["block_number"]) == (AWAITING, block)
    assert rig.client.calls["eth_getTransactionByHash"] == 0

    rig.mine_and_poll(2)
    assert rig.view(sid)["verdict"] == CONFIRMED
    receipts = receipts_for(rig)
    receipts.run(rig)
    verified = verify_receipt(receipts.latest(sid), trusted_signers=[receipts.signer.address])
    assert (verified.tx_hash, verified.facts.block_number, verified.claims) == (tx, block, ())


def test_tx_registered_while_pending_is_followed_to_finality(rig: Rig, node: DevNode) -> None:
    node.automine(False)
    tx = node.send()
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()  # pending: sender, nonce and signed bytes recorded
    rec = rig.settlement(sid)
    assert (rec.sender, rec.nonce) == (node.accounts[0].lower(), 0)
    assert rec.raw_tx is not None
    assert "0x" + keccak256(bytes.fromhex(rec.raw_tx[2:])).hex() == tx  # rebuilt, hash-checked

    node.mine(1)
    node.automine(True)  # Ganache mines one more block here
    rig.watcher.catch_up()
    rig.mine_and_poll(2)
    assert rig.view(sid)["verdict"] == CONFIRMED
    assert rig.watcher.head is not None and rig.watcher.head.number == node.head()
    _asked_once(rig, "eth_getBlockReceipts", "eth_getRawTransactionByHash")


def test_reorg_that_drops_the_tx_is_recorded(rig: Rig, node: DevNode) -> None:
    snapshot = node.snapshot()
    old_head = node.head()
    tx = node.send()
    node.receipt(tx)
    sid = rig.register(tx).settlement_id
    rig.mine_and_poll(1)
    assert rig.view(sid)["confirmations"] == 2
    old_tx_block = rig.view(sid)["block_hash"]

    node.reorg_from(snapshot, 3)  # the tx's block and the one above replaced, one more
    rig.watcher.catch_up()
    [reorg] = rig.store.reorgs("local")
    assert reorg.ancestor_number == old_head
    assert reorg.touched == [sid]
    assert old_tx_block in [r["old_hash"] for r in reorg.replaced]
    view = rig.view(sid)
    assert (view["verdict"], view["block_number"], view["reorg_count"]) == (AWAITING, None, 1)

    rig.mine_and_poll(3)  # gone from the new branch: never confirmed
    assert rig.view(sid)["verdict"] == AWAITING
    assert rig.watcher.head is not None and rig.watcher.head.number == node.head()


def test_replaced_tx_fails_and_its_failure_receipt_verifies(rig: Rig, node: DevNode) -> None:
    node.automine(False)
    tip = hex(GWEI)
    a = node.send(to=1, value=1, maxFeePerGas=hex(3 * GWEI), maxPriorityFeePerGas=tip, nonce="0x0")
    sid = rig.register(a).settlement_id
    rig.watcher.poll()  # learns sender and nonce (and the signed bytes) while A is pending
    # Same nonce, fees raised past both nodes' replacement bump (Ganache wants 10 %).
    b = node.send(
        to=2, value=2, maxFeePerGas=hex(4 * GWEI), maxPriorityFeePerGas=hex(2 * GWEI), nonce="0x0"
    )
    node.mine(1)
    node.automine(True)
    node.receipt(b)
    rig.watcher.catch_up()
    rig.mine_and_poll(2)
    view = rig.view(sid)
    assert (view["verdict"], view["replaced_by"]) == (FAILED, b)
    assert view["evidence"]["kind"] == "replaced"

    receipts = receipts_for(rig)
    receipts.run(rig)
    verified = verify_receipt(receipts.latest(sid), trusted_signers=[receipts.signer.address])
    assert verified.kind == "settlement_failure_receipt"
    assert verified.tx_hash == a


def test_reverted_tx_fails_with_a_failure_receipt_where_the_node_allows(
    rig: Rig, node: DevNode
) -> None:
    """A revert and a success in one block. Hardhat: both receipts verify offline. Ganache
    commits a reverted receipt's status as 0x00 (not EIP-658's empty string), so its
    receiptsRoot does not rebuild canonically: only that receipt is refused, with the reason,
    and the success in the same block is still proven."""
    node.automine(False)
    bad = node.send_revert(sender=0)
    good = node.send(sender=1, to=2)
    node.mine(1)
    node.automine(True)
    assert node.receipt(bad)["blockNumber"] == node.receipt(good)["blockNumber"]
    bad_id = rig.register(bad).settlement_id
    good_id = rig.register(good).settlement_id
    rig.watcher.catch_up()
    rig.mine_and_poll(2)
    view = rig.view(bad_id)
    assert (view["verdict"], view["status"], view["evidence"]["kind"]) == (FAILED, 0, "reverted")
    assert rig.view(good_id)["verdict"] == CONFIRMED

    receipts = receipts_for(rig)
    receipts.run(rig)
    trusted = [receipts.signer.address]
    verified = verify_receipt(receipts.latest(good_id), trusted_signers=trusted)
    assert verified.kind == "settlement_finality_receipt"
    if node.name == "hardhat":
        failure = verify_receipt(receipts.latest(bad_id), trusted_signers=trusted)
        assert (failure.kind, failure.facts.status) == ("settlement_failure_receipt", 0)
        return
    assert receipts.store.latest(bad_id) is None  # refused, not signed
    builder = ReceiptBuilder(rig.config, rig.client, receipts.signer.address)
    with pytest.raises(ProofUnavailable, match="status as 0x00"):
        builder.decision_body(rig.settlement(bad_id), rig.clock())
