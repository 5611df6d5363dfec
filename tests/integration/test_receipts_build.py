"""Receipts built from real anvil blocks, and checked by the offline verifier.

Each test drives a real anvil and a ChainWatcher by hand (as test_tracking does), then runs
the receipts component the way the daemon does after a poll, and verifies what it stored
with :func:`guard.verify.verify_receipt`. Across hardforks (London, Cancun, Prague and
anvil's default), with every tx type the fork supports in one block, and with 50 txs in
one block.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from chains.proofs import Trie, fetch_block_tries
from chains.rpc import RpcClient, Web3Transport
from guard.hashing import keccak256
from guard.tx_encode import encode_checked
from guard.verify import verify_receipt
from tests.integration.receipts_helpers import Receipts, TxFactory, receipts_for
from tests.support.anvil import Anvil
from tests.support.rigs import Rig, RigFactory
from watcher.receipts.builder import ReceiptBuilder

pytestmark = pytest.mark.anvil


@pytest.fixture(scope="module")
def reset_anvil() -> Iterator[Callable[..., Anvil]]:
    """Factory: ``reset_anvil("--no-mining", ...)`` → one anvil per argument list for the whole
    module, put back to its genesis (``anvil_reset``) for each test that asks for it.

    A node's first blob tx costs it about 3 s of CPU (it loads the KZG trusted setup); a node
    started per test paid that in each of the nine tests sending one. After a reset the node
    is the one a fresh start gives: block 0, the same genesis and funded accounts, still not
    mining on its own."""
    nodes: dict[tuple[str, ...], Anvil] = {}

    def get(*args: str) -> Anvil:
        node = nodes.get(args)
        if node is None:
            node = nodes[args] = Anvil(*args)
        else:
            node.rpc("anvil_reset")
        return node

    yield get
    for node in nodes.values():
        node.stop()


TYPES_BY_FORK = {
    "london": ("legacy", "access_list", "dynamic"),
    "cancun": ("legacy", "access_list", "dynamic", "blob"),
    "prague": ("legacy", "access_list", "dynamic", "blob", "set_code"),
    None: ("legacy", "access_list", "dynamic", "blob", "set_code"),  # anvil 1.7.1: Osaka
}


@pytest.mark.parametrize("fork", list(TYPES_BY_FORK), ids=lambda f: f or "default")
def test_every_tx_type_of_a_fork_gets_a_receipt_that_verifies(
    fork: str | None, reset_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    anvil = reset_anvil("--no-mining", *(("--hardfork", fork) if fork else ()))
    rig = make_rig(anvil, poll=True)
    factory = TxFactory(anvil)
    wrapper = "7594" if fork is None else "4844"  # the sidecar form of the fork
    raws = {
        kind: factory.blob(wrapper) if kind == "blob" else getattr(factory, kind)()
        for kind in TYPES_BY_FORK[fork]
    }
    hashes = {kind: factory.send(raw) for kind, raw in raws.items()}
    ids = {kind: rig.register(h).settlement_id for kind, h in hashes.items()}
    rig.watcher.poll()
    rig.mine_and_poll(3)  # all in block 1, depth 3
    receipts = receipts_for(rig)
    receipts.run(rig)

    for kind, sid in ids.items():
        receipt = receipts.latest(sid)
        verified = verify_receipt(receipt, trusted_signers=[receipts.signer.address])
        assert verified.kind == "settlement_finality_receipt"
        assert verified.tx_hash == hashes[kind]
        assert (verified.facts.block_number, verified.facts.status) == (1, 1)
        assert verified.facts.confirmations == 3
        assert verified.facts.anchor == (3, anvil.block(3)["hash"])
        assert verified.claims == ()
        # Anvil commits a blob tx with its sidecar: the proof carries that form.
        expected_form = "network" if kind == "blob" else "canonical"
        assert verified.facts.transaction_form == expected_form, kind
    [tx_index] = {len(ids)}
    assert tx_index == len(TYPES_BY_FORK[fork])


@pytest.mark.parametrize("fork", list(TYPES_BY_FORK), ids=lambda f: f or "default")
def test_tx_objects_rebuild_each_signed_tx_and_the_transactions_root(
    fork: str | None, reset_anvil: Callable[..., Anvil]
) -> None:
    anvil = reset_anvil("--no-mining", *(("--hardfork", fork) if fork else ()))
    factory = TxFactory(anvil)
    wrapper = "7594" if fork is None else "4844"
    sent = [
        factory.blob(wrapper) if kind == "blob" else getattr(factory, kind)()
        for kind in TYPES_BY_FORK[fork]
    ]
    hashes = [factory.send(raw) for raw in sent]
    anvil.mine(1)
    block = anvil.rpc("eth_getBlockByNumber", "0x1", True)
    encoded = [encode_checked(tx) for tx in block["transactions"]]
    assert ["0x" + keccak256(e.canonical).hex() for e in encoded] == hashes
    assert [e.committed for e in encoded] == sent  # blob: the network form, as it was sent
    assert "0x" + Trie([e.committed for e in encoded]).root.hex() == block["transactionsRoot"]

    client = RpcClient(Web3Transport(anvil.url))
    tries = fetch_block_tries(client, anvil.block(1))
    assert tries.tx_source == "local"
    assert client.calls["eth_getRawTransactionByHash"] == 0


def _tracked_block_of(anvil: Anvil, rig: Rig, count: int) -> tuple[Receipts, list[str]]:
    """A receipts issuer created before the block is tracked (as in the daemon), ``count``
    txs in block 1 all watched, confirmed at depth 3."""
    receipts = receipts_for(rig)
    factories = [TxFactory(anvil, account) for account in range(3)]
    kinds = ["legacy", "access_list", "dynamic", "blob"]
    hashes = []
    for i in range(count):
        factory = factories[i % 3]
        kind = kinds[i % 4]
        hashes.append(factory.send(factory.blob() if kind == "blob" else getattr(factory, kind)()))
    ids = [rig.register(h).settlement_id for h in hashes]
    anvil.mine(1)
    rig.watcher.poll()
    rig.mine_and_poll(2)
    assert all(rig.settlement(sid).verdict == "FINALITY_CONFIRMED" for sid in ids)
    return receipts, ids


def _build_counting_calls(rig: Rig, receipts: Receipts) -> Counter[str]:
    before = Counter(rig.client.calls)
    receipts.run(rig)
    return rig.client.calls - before


def test_builder_reuses_the_tx_objects_the_tracker_fetched(
    reset_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    anvil = reset_anvil("--no-mining")
    rig = make_rig(anvil, poll=True)
    receipts, ids = _tracked_block_of(anvil, rig, 12)
    calls = _build_counting_calls(rig, receipts)
    # Headers from the store's window, receipts from the engine's eth_getBlockReceipts, txs
    # from the tracker's full block: building costs no call but the confirming block's one
    # eth_getProof of the history contract (watcher/receipts/ancestry.py), shared by all 12.
    assert calls == Counter({"eth_getProof": 1}), calls
    for sid in ids:
        assert verify_receipt(receipts.latest(sid)).facts.block_number == 1


def _builder(receipts: Receipts, rig: Rig) -> ReceiptBuilder:
    builder = receipts.issuer.builders[rig.config.name]
    assert isinstance(builder, ReceiptBuilder)
    return builder


def test_a_tx_object_that_does_not_match_its_hash_falls_back_to_the_nodes_bytes(
    reset_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    anvil = reset_anvil("--no-mining")
    rig = make_rig(anvil, poll=True)
    receipts, ids = _tracked_block_of(anvil, rig, 8)
    block_hash = anvil.block(1)["hash"]
    held = _builder(receipts, rig).tx_objects.get(block_hash)
    assert held is not None
    held["transactions"][5]["value"] = "0x2"  # a node that misreports one field
    calls = _build_counting_calls(rig, receipts)
    assert calls["eth_getRawTransactionByHash"] == 1  # that tx only
    assert _builder(receipts, rig)._tries[block_hash].tx_source == "raw"
    for sid in ids:
        verify_receipt(receipts.latest(sid))


def test_leaves_that_miss_the_root_fall_back_to_the_nodes_bytes(
    reset_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    anvil = reset_anvil("--no-mining")
    rig = make_rig(anvil, poll=True)
    receipts, ids = _tracked_block_of(anvil, rig, 4)
    block_hash = anvil.block(1)["hash"]
    held = _builder(receipts, rig).tx_objects.get(block_hash)
    assert held is not None
    blob = held["transactions"][3]
    del blob["blobs"]  # hash still right (canonical form), but anvil committed the sidecar
    calls = _build_counting_calls(rig, receipts)
    assert calls["eth_getRawTransactionByHash"] == 4
    assert _builder(receipts, rig)._tries[block_hash].tx_source == "raw"
    verified = verify_receipt(receipts.latest(ids[3]))
    assert verified.facts.transaction_form == "network"


def test_fifty_txs_in_one_block(start_anvil: Callable[..., Anvil], make_rig: RigFactory) -> None:
    anvil = start_anvil("--no-mining")
    rig = make_rig(anvil, poll=True)
    factories = [TxFactory(anvil, account) for account in range(3)]
    hashes = [factories[i % 3].send(factories[i % 3].dynamic()) for i in range(50)]
    anvil.mine(1)
    assert len(anvil.block(1)["transactions"]) == 50
    picked = [hashes[0], hashes[1], hashes[17], hashes[31], hashes[49]]
    ids = [rig.register(h).settlement_id for h in picked]
    rig.watcher.poll()
    rig.mine_and_poll(2)
    receipts = receipts_for(rig)
    receipts.run(rig)
    indexes = set()
    for tx, sid in zip(picked, ids, strict=True):
        verified = verify_receipt(receipts.latest(sid))
        assert verified.tx_hash == tx
        indexes.add(verified.facts.tx_index)
    assert len(indexes) == 5


def test_reverted_tx_gets_a_failure_receipt(anvil: Anvil, make_rig: RigFactory) -> None:
    rig = make_rig(anvil, poll=True)
    tx = anvil.send_revert()
    anvil.receipt(tx)
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()
    rig.mine_and_poll(2)
    assert rig.settlement(sid).verdict == "SETTLEMENT_FAILED"
    receipts = receipts_for(rig)
    receipts.run(rig)
    receipt = receipts.latest(sid)
    assert receipt["failure"] == {"reason": "reverted"}
    verified = verify_receipt(receipt)
    assert verified.facts.status == 0
    assert verified.verdict == "SETTLEMENT_FAILED"


def _replace(anvil: Anvil, rig: Rig, probe_first: bool) -> tuple[str, str, str]:
    """A watched tx A replaced by B (same sender and nonce), B at depth 3."""
    factory = TxFactory(anvil)
    a = factory.send(factory.dynamic(max_fee=3 * 10**9))
    sid = rig.register(a).settlement_id
    if probe_first:
        rig.watcher.poll()  # sees A pending: records sender, nonce and signed bytes
    factory.nonce -= 1
    b = factory.send(factory.dynamic(max_fee=3 * 10**9 + 1))
    assert anvil.rpc("eth_getTransactionByHash", a) is None
    rig.mine_and_poll(3)
    return sid, a, b


def test_replaced_tx_gets_a_failure_receipt_proving_the_link(
    start_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    anvil = start_anvil("--no-mining")
    rig = make_rig(anvil, poll=True)
    sid, a, b = _replace(anvil, rig, probe_first=True)
    assert rig.settlement(sid).verdict == "SETTLEMENT_FAILED"
    assert rig.settlement(sid).raw_tx is not None
    receipts = receipts_for(rig)
    receipts.run(rig)
    receipt = receipts.latest(sid)
    assert receipt["failure"]["reason"] == "replaced"
    assert receipt["failure"]["replaced_by"] == b
    assert receipt["failure"]["watched_raw_tx"] == rig.settlement(sid).raw_tx
    verified = verify_receipt(receipt)
    assert verified.tx_hash == a
    assert verified.claims == ()  # sender and nonce proven from both signatures


def test_reorg_the_tracker_has_not_seen_is_revoked_once_it_sees_it(
    anvil: Anvil, make_rig: RigFactory
) -> None:
    """Receipts are built from the tracker's view (the store's window, no call): one built
    between a reorg and the poll that sees it attests the decision as it was made, and is
    revoked by that poll's finality violation; the new one matches the final chain."""
    rig = make_rig(anvil, confirmations=2, poll=True)
    anvil.mine(2)
    tx = anvil.send()
    anvil.receipt(tx)
    raw = anvil.raw_tx(tx)
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()
    rig.mine_and_poll(1)
    assert rig.settlement(sid).verdict == "FINALITY_CONFIRMED"
    anvil.reorg(2, [(raw, 1)])  # the tx moves one block up: the decision's blocks are gone
    receipts = receipts_for(rig)
    receipts.run(rig)  # before the watcher saw the reorg: the decision as the tracker saw it
    assert [r.kind for r in receipts.store.for_settlement(sid)] == ["settlement_finality_receipt"]

    rig.watcher.poll()  # the engine reverses, then confirms again on the new branch
    rig.mine_and_poll(1)
    rig.clock.advance(10)  # past the component's backoff
    receipts.run(rig)
    kinds = [r.kind for r in receipts.store.for_settlement(sid)]
    assert kinds == [
        "settlement_finality_receipt",
        "receipt_revocation",
        "settlement_finality_receipt",
    ]
    verified = verify_receipt(receipts.latest(sid))
    assert verified.facts.block_number is not None
    assert verified.facts.block_hash == anvil.block(verified.facts.block_number)["hash"]


def test_finality_violation_revokes_the_receipt_and_a_new_one_follows(
    anvil: Anvil, make_rig: RigFactory
) -> None:
    rig = make_rig(anvil, confirmations=2, poll=True)
    anvil.mine(2)
    tx = anvil.send()
    anvil.receipt(tx)
    raw = anvil.raw_tx(tx)
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()
    rig.mine_and_poll(1)
    receipts = receipts_for(rig)
    receipts.run(rig)
    first = receipts.latest(sid)

    # Deeper than the confirmation; the tx is re-included in the second new block (in the
    # first one the engine does not look for it again yet: the reversal commits with it).
    anvil.reorg(3, [(raw, 1)])
    rig.watcher.poll()
    assert rig.events(sid, "finality_violation")
    receipts.run(rig)
    rig.mine_and_poll(2)
    receipts.run(rig)

    stored = receipts.store.for_settlement(sid)
    assert [r.kind for r in stored] == [
        "settlement_finality_receipt",
        "receipt_revocation",
        "settlement_finality_receipt",
    ]
    revocation = verify_receipt(stored[1].body)
    assert revocation.facts.revokes == first["digest"]
    assert stored[1].revokes == stored[0].id
    latest = receipts.latest(sid)
    assert latest["digest"] == stored[2].digest != first["digest"]
    assert verify_receipt(latest).facts.block_hash == anvil.block(3)["hash"]


def test_restart_builds_what_is_missing_and_nothing_twice(
    anvil: Anvil, make_rig: RigFactory
) -> None:
    rig = make_rig(anvil, poll=True)
    ids = []
    for _ in range(3):
        tx = anvil.send()
        anvil.receipt(tx)
        ids.append(rig.register(tx).settlement_id)
    rig.watcher.poll()
    rig.mine_and_poll(3)
    first = receipts_for(rig)
    first.issuer.scan(rig.config.name)
    _builder(first, rig).client = rig.client
    # "crash" after one receipt: only the first settlement got its receipt
    first.issuer._due[rig.config.name] = {ids[0]: first.issuer._due[rig.config.name][ids[0]]}
    first.issuer.work(rig.config.name)
    assert [len(first.store.for_settlement(s)) for s in ids] == [1, 0, 0]

    again = receipts_for(rig)  # a restarted daemon: cursor 0
    again.run(rig)
    again.run(rig)
    assert [len(again.store.for_settlement(s)) for s in ids] == [1, 1, 1]


def test_finalized_basis_says_it_is_the_nodes_claim(
    start_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    anvil = start_anvil("--slots-in-an-epoch", "1")
    rig = make_rig(anvil, confirmations=50, finality="finalized", poll=True)
    anvil.mine(3)
    tx = anvil.send()
    anvil.receipt(tx)
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()
    rig.mine_and_poll(2)
    assert rig.settlement(sid).verdict == "FINALITY_CONFIRMED"
    receipts = receipts_for(rig)
    receipts.run(rig)
    receipt = receipts.latest(sid)
    assert receipt["finality"]["basis"] == "finalized"
    assert "claim" in receipt["finality"]["claim"]
    verified = verify_receipt(receipt)
    assert verified.facts.confirmations == 2  # the decision's depth: the rest is the tag
    [claim] = verified.claims
    assert "finalized" in claim and "node's claim" in claim


def test_timeout_signature_names_the_head_at_the_deadline(
    start_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    anvil = start_anvil("--no-mining")
    start = int(anvil.block()["timestamp"], 16) + 100
    anvil.rpc("evm_setNextBlockTimestamp", start)
    anvil.mine(1)
    rig = make_rig(anvil, poll=True)
    rig.clock.now = start * 1000
    sid = rig.register("0x" + "ab" * 32, timeout_s=5).settlement_id
    for offset in (2, 4, 7):  # blocks at +2 s and +4 s, before the deadline (+5 s); one at +7 s
        anvil.rpc("evm_setNextBlockTimestamp", start + offset)
        anvil.mine(1)
    rig.clock.now = (start + 7) * 1000
    rig.watcher.catch_up()
    assert rig.settlement(sid).verdict == "TIMEOUT_TREATED_AS_FAILURE"
    receipts = receipts_for(rig)
    receipts.run(rig)
    receipt = receipts.latest(sid)
    assert receipt["timeout"]["deadline"] == (start + 5) * 1000
    assert receipt["proof"]["head_at_deadline"]["number"] == "0x3"
    assert receipt["proof"]["next_header"]["number"] == "0x4"
    verified = verify_receipt(receipt)
    assert verified.claims == ()
    assert verified.anchor == (4, anvil.block(4)["hash"])
