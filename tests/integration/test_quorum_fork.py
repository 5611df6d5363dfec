"""Quorum over real nodes: one anvil, a second anvil forked from it, proxies in front.

The forked node shares history up to the fork point and then has its own blocks, so at the
inclusion height it shows another hash: exactly a node on a competing chain.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chains.quorum import QuorumGate
from guard.settlement import Verdict
from tests.integration.helpers import wait_included
from tests.integration.quorum_helpers import MultiRig, multi_rig, observed_by
from tests.support.anvil import Anvil


@pytest.fixture
def nodes(start_anvil: Callable[..., Anvil]) -> tuple[Anvil, Anvil, str]:
    """``(main, fork, tx)``: ``tx`` is in a main block the fork replaced with its own."""
    main = start_anvil()
    main.mine(2)
    fork_point = main.head()
    tx = main.send()
    wait_included(main, tx)
    fork = start_anvil("--fork-url", main.url, "--fork-block-number", str(fork_point))
    fork.mine(8)
    return main, fork, tx


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., MultiRig]]:
    rigs: list[MultiRig] = []

    def build(main: Anvil, upstreams: list[str], quorum: int) -> MultiRig:
        rig = multi_rig(main, f"sqlite:///{tmp_path}/q{len(rigs)}.db", upstreams, quorum)
        rigs.append(rig)
        return rig

    yield build
    for rig in rigs:
        rig.close()


def test_two_of_three_waits_while_only_the_fork_answers(
    nodes: tuple[Anvil, Anvil, str], make: Callable[..., MultiRig]
) -> None:
    main, fork, tx = nodes
    rig = make(main, [main.url, main.url, fork.url], 2)
    primary, second, forked = rig.proxies
    second.http_500 = True
    rig.watcher.poll()
    rec = rig.register(tx)
    rig.mine_and_poll(3)
    waiting = rig.settlement(rec.settlement_id)
    assert waiting.verdict == Verdict.AWAITING_FINALITY
    assert rig.view(rec.settlement_id)["receipt"] is None
    # The settlement view says why it waits (the gate's reason).
    evidence = rig.view(rec.settlement_id)["evidence"]
    assert evidence["kind"] == "awaiting_quorum"
    assert "quorum not reached: 1 of 2 endpoints agree" in evidence["facts"]["reason"]
    [event] = rig.events(kind="rpc_disagreement")
    block = int(main.receipt(tx)["blockNumber"], 16)
    assert event.payload["block_number"] == block
    assert event.payload["said"][primary.url] == main.block(block)["hash"]
    assert event.payload["said"][forked.url] == fork.block(block)["hash"]
    assert event.severity == "critical"
    # Polling again does not repeat the same alert.
    rig.mine_and_poll(1)
    assert len(rig.events(kind="rpc_disagreement")) == 1
    assert rig.settlement(rec.settlement_id).verdict == Verdict.AWAITING_FINALITY
    # The second honest node comes back: two agree, the settlement confirms.
    second.clear()
    time.sleep(0.5)  # the circuit's backoff
    rig.mine_and_poll(1)
    done = rig.settlement(rec.settlement_id)
    assert done.verdict == Verdict.FINALITY_CONFIRMED
    assert done.block_hash == main.block(block)["hash"]
    agreed = set(observed_by(rig, rec.settlement_id))
    assert {primary.url, second.url} <= agreed
    assert forked.url not in agreed


def test_quorum_of_one_follows_the_single_node(
    nodes: tuple[Anvil, Anvil, str], make: Callable[..., MultiRig]
) -> None:
    """The documented trade-off: k = 1 trusts the followed node, a forked peer is ignored."""
    main, fork, tx = nodes
    rig = make(main, [main.url, fork.url], 1)
    rig.watcher.poll()
    rec = rig.register(tx)
    rig.mine_and_poll(3)
    assert rig.settlement(rec.settlement_id).verdict == Verdict.FINALITY_CONFIRMED
    assert rig.events(kind="rpc_disagreement") == []


def test_two_of_two_with_the_fork_never_confirms(
    nodes: tuple[Anvil, Anvil, str], make: Callable[..., MultiRig]
) -> None:
    main, fork, tx = nodes
    rig = make(main, [main.url, fork.url], 2)
    rig.watcher.poll()
    rec = rig.register(tx)
    for _ in range(4):
        rig.mine_and_poll(2)
    assert rig.settlement(rec.settlement_id).verdict == Verdict.AWAITING_FINALITY
    assert rig.view(rec.settlement_id)["receipt"] is None
    # The forked endpoint is put back on the main chain: the settlement confirms.
    rig.proxies[1].upstream = main.url
    rig.mine_and_poll(1)
    assert rig.settlement(rec.settlement_id).verdict == Verdict.FINALITY_CONFIRMED


def test_finalized_tag_that_changes_hash_is_a_finality_violation(
    start_anvil: Callable[..., Anvil], make: Callable[..., MultiRig]
) -> None:
    main = start_anvil("--slots-in-an-epoch", "1")
    main.mine(3)
    fork = start_anvil(
        "--fork-url", main.url, "--fork-block-number", "1", "--slots-in-an-epoch", "1"
    )
    fork.mine(2)  # fork head 3, finalized 1: the same block as main's? no: main finalizes 1
    main.mine(2)  # main finalized = head - 2 = 3, fork's finalized 1 is shared history
    rig = make(main, [main.url, main.url], 2)
    gate = rig.watcher.gate
    assert isinstance(gate, QuorumGate)
    gate.check_finalized()
    assert rig.events(kind="finality_violation") == []
    assert gate.trusted_finalized == main.head() - 2
    # One endpoint moves to the fork: its finalized block goes backwards.
    rig.proxies[1].upstream = fork.url
    gate.check_finalized()
    [event] = rig.events(kind="finality_violation")
    assert event.payload["endpoint"] == rig.proxies[1].url
    assert "backwards" in event.payload["reason"]
    # A tag running ahead of the others is not trusted: the k-th highest is.
    assert gate.trusted_finalized == fork.head() - 2


def test_finalized_tag_running_ahead_on_one_node_is_not_trusted(
    start_anvil: Callable[..., Anvil], tmp_path: Path
) -> None:
    """finality = "finalized", quorum 2: our own node's tag says the block is final, the
    other endpoint's does not yet. Nothing is confirmed until two endpoints' tags cover it;
    meanwhile the settlement view says why it waits."""
    main = start_anvil("--slots-in-an-epoch", "1")  # honest finalized = head - 2
    main.mine(3)
    rig = multi_rig(
        main,
        f"sqlite:///{tmp_path}/fin.db",
        quorum=2,
        confirmations=1,
        finality="finalized",
    )
    try:
        liar, honest = rig.proxies
        liar.inject("finalized_ahead")  # the followed node: its finalized tag is its head
        rig.watcher.poll()
        tx = main.send()
        block = wait_included(main, tx)
        rec = rig.register(tx)
        rig.watcher.catch_up()
        rig.mine_and_poll(1)  # the liar says `block` is final; honest says block - 1
        waiting = rig.view(rec.settlement_id)
        assert waiting["verdict"] == Verdict.AWAITING_FINALITY
        assert waiting["receipt"] is None
        assert rig.watcher.finalized_number is not None
        assert rig.watcher.finalized_number < block
        assert "not trusted yet" in waiting["evidence"]["facts"]["waiting"]
        assert honest.calls["eth_getBlockByNumber"] > 0
        # The honest node's tag reaches the block: two endpoints agree, it is final.
        rig.mine_and_poll(2)
        done = rig.settlement(rec.settlement_id)
        assert done.verdict == Verdict.FINALITY_CONFIRMED
        assert done.block_hash == main.block(block)["hash"]
        assert rig.watcher.finalized_number is not None
        assert rig.watcher.finalized_number >= block
        assert rig.watcher.finalized_number <= main.head() - 2  # never the liar's height
    finally:
        rig.close()


def test_a_tx_found_deep_by_a_probe_on_a_quiet_chain_is_confirmed_by_the_quorum(
    anvil: Anvil, tmp_path: Path
) -> None:
    """Registered after its block was processed and already N deep, on a chain that then
    goes quiet: the probe finds it, the gate is asked about it there and then, and it is
    confirmed without waiting for a block that may never come."""
    rig = multi_rig(anvil, f"sqlite:///{tmp_path}/probe.db", quorum=2)
    try:
        tx = anvil.send()
        wait_included(anvil, tx)
        rig.mine_and_poll(3)  # processed and 4 deep before anyone asks
        rec = rig.register(tx)
        rig.watcher.poll()  # no new block: only the probe
        done = rig.settlement(rec.settlement_id)
        assert done.verdict == Verdict.FINALITY_CONFIRMED, done.decision
        assert len(observed_by(rig, rec.settlement_id)) == 2
    finally:
        rig.close()
