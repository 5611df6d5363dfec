"""Capability detection and the standard-calls fallbacks, on real nodes; and a chain that
no failing poll can hold hostage.

* Hardhat and Ganache, unchanged, lack ``eth_getBlockReceipts`` and
  ``eth_getRawTransactionByHash``: each endpoint is asked once, then the fallback answers
  the same thing from standard calls (counted: the RPC budget counts batch elements).
* A transient error (anvil behind a real proxy that answers -32000) is not taken for a
  missing method: once it clears, the optional method is used again.
* With several endpoints, one that lacks a method stays healthy and followed.
* A node that fails every poll: timeouts are still decided, and the health names why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chains.capabilities import not_offered
from chains.errors import ChainError, RpcErrorResponse
from chains.health import EndpointHealth
from chains.multi import FailoverTransport, MultiRpcClient, TrackedTransport
from chains.proofs import Trie
from chains.rpc import RpcClient, Web3Transport
from guard.hashing import keccak256
from tests.support.anvil import Anvil, in_ci
from tests.support.devnode import DevNode
from tests.support.faulty_proxy import FaultyProxy
from tests.support.ganache import Ganache, ganache_installed
from tests.support.hardhat import Hardhat, hardhat_installed
from tests.support.rigs import make_watcher

pytestmark = pytest.mark.anvil

NODES = {"hardhat": (Hardhat, hardhat_installed), "ganache": (Ganache, ganache_installed)}


def _start(name: str) -> DevNode:
    cls, installed = NODES[name]
    if not installed():
        if in_ci():
            pytest.fail(f"{name} is required under CI=true (scripts/bootstrap.sh)")
        pytest.skip(f"{name} not installed")
    return cls()


@pytest.fixture(params=list(NODES))
def node(request: pytest.FixtureRequest) -> Iterator[DevNode]:
    with _start(request.param) as started:
        yield started


def _block_of_three(node: DevNode) -> tuple[dict[str, Any], list[str]]:
    """Block with three value transfers from three accounts; (block, tx hashes)."""
    node.automine(False)
    hashes = [node.send(sender=i, to=5) for i in range(3)]
    node.mine(1)
    node.automine(True)
    number = int(node.receipt(hashes[0])["blockNumber"], 16)
    return dict(node.rpc("eth_getBlockByNumber", hex(number), False)), hashes


def test_a_missing_method_is_asked_once_and_the_fallback_gives_the_same(node: DevNode) -> None:
    block, hashes = _block_of_three(node)
    block_hash = str(block["hash"])
    client = RpcClient(Web3Transport(node.url))

    first = client.raw_block_receipts(block_hash)
    again = client.raw_block_receipts(block_hash)
    assert [r["transactionHash"] for r in first] == list(block["transactions"])
    assert (
        first == again == [node.rpc("eth_getTransactionReceipt", h) for h in block["transactions"]]
    )
    assert set(client.capabilities.lacking(node.url)) == {"eth_getBlockReceipts"}
    # Asked once; each fallback: the block's hashes + one receipt per tx (in one batch).
    assert client.calls["eth_getBlockReceipts"] == 1
    assert client.calls["eth_getBlockByHash"] == 2
    assert client.calls["eth_getTransactionReceipt"] == 6
    assert client.fallbacks["eth_getBlockReceipts"] == 2

    for _ in range(2):
        raws = client.raw_transactions(hashes)
        assert ["0x" + keccak256(bytes.fromhex(r[2:])).hex() for r in raws if r] == hashes
    assert client.calls["eth_getRawTransactionByHash"] == 3  # one batch of 3, once
    assert client.calls["eth_getTransactionByHash"] == 6

    by_index = client.raw_block_transactions(block_hash, 3)
    leaves = [bytes.fromhex(r[2:]) for r in by_index]
    assert "0x" + Trie(leaves).root.hex() == block["transactionsRoot"]
    assert client.calls["eth_getRawTransactionByBlockHashAndIndex"] == 3
    assert client.errors["eth_getBlockReceipts"] == 1  # the one answer that said so


def test_transient_errors_are_not_taken_for_a_missing_method(anvil: Anvil) -> None:
    # What nodes and providers answer for a method they lack ...
    assert not_offered("eth_getBlockReceipts", -32601, "the method does not exist")
    assert not_offered(
        "eth_getBlockReceipts", -32004, "Method eth_getBlockReceipts is not supported"
    )
    ganache = "The method eth_getRawTransactionByHash does not exist/is not available"
    assert not_offered("eth_getRawTransactionByHash", -32700, ganache)
    assert not_offered("eth_getBlockReceipts", -32000, "Unsupported method: eth_getBlockReceipts")
    # ... and what they answer for one bad moment.
    assert not not_offered("eth_getBlockReceipts", -32000, "header not found")
    assert not not_offered("eth_getBlockReceipts", -32005, "limit exceeded")
    assert not not_offered("eth_getBlockReceipts", -32000, "request timed out")
    assert not not_offered("eth_getTransactionReceipt", -32700, "Parse error")

    tx = anvil.send()
    block_hash = str(anvil.receipt(tx)["blockHash"])
    proxy = FaultyProxy(anvil.url)
    try:
        client = RpcClient(Web3Transport(proxy.url))
        proxy.inject("rpc_error")  # -32000 "injected: upstream busy"
        with pytest.raises(RpcErrorResponse):
            client.raw_block_receipts(block_hash)
        assert client.capabilities.lacking(proxy.url) == {}
        proxy.clear()
        [receipt] = client.raw_block_receipts(block_hash)
        assert receipt["transactionHash"] == tx
        assert client.calls["eth_getBlockReceipts"] == 2
        assert client.fallbacks["eth_getBlockReceipts"] == 0
    finally:
        proxy.close()


def test_an_endpoint_that_lacks_a_method_stays_healthy_and_followed(
    start_anvil: Callable[..., Anvil],
) -> None:
    hardhat = _start("hardhat")
    anvil = start_anvil()  # the same chain id, another node: the one failover would pick
    try:
        members = [TrackedTransport(EndpointHealth(n.url)) for n in (hardhat, anvil)]
        client = MultiRpcClient(FailoverTransport(members, chain_id=31337))
        hashes = [hardhat.send() for _ in range(4)]
        for tx in hashes:
            block_hash = str(hardhat.receipt(tx)["blockHash"])
            [receipt] = client.raw_block_receipts(block_hash)
            assert receipt["transactionHash"] == tx
        hardhat_health = client.health[0]
        assert (hardhat_health.state, hardhat_health.errors) == ("closed", 0)
        assert client.transport.active == 0 and client.transport.failovers == 0
        report = client.health_report()
        assert report[0]["not_offered"] == ["eth_getBlockReceipts"]
        assert report[1]["not_offered"] == []
    finally:
        hardhat.stop()


def test_a_poll_that_fails_every_time_still_times_out_and_names_the_problem(
    anvil: Anvil, tmp_path: Path
) -> None:
    proxy = FaultyProxy(anvil.url)
    rig = make_watcher(anvil, f"sqlite:///{tmp_path}/h.db", transport=Web3Transport(proxy.url))
    try:
        rig.watcher.poll()  # head 0 processed
        sid = rig.register("0x" + "ab" * 32, timeout_s=4).settlement_id
        proxy.inject("rpc_error")  # from now on every call fails
        anvil.mine(4)  # the node moves on; we cannot see it
        for _ in range(3):
            rig.clock.advance(seconds=2.5)
            with pytest.raises(ChainError, match="injected: upstream busy"):
                rig.watcher.poll()
            rig.watcher.note_poll(rig.watcher.last_error)
        view = rig.view(sid)
        assert view["verdict"] == "TIMEOUT_TREATED_AS_FAILURE"
        assert rig.events(sid, "settlement_timed_out")
        [unhealthy] = rig.events(kind="rpc_unhealthy")
        assert "injected: upstream busy" in str(unhealthy.payload["reason"])
        assert unhealthy.payload["failed_polls"] == 3

        proxy.clear()  # the node answers again: the head catches up
        rig.watcher.catch_up()
        assert rig.watcher.head is not None and rig.watcher.head.number == anvil.head()
    finally:
        rig.store.close()
        proxy.close()
