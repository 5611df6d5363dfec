"""One tx, two callers, one watch: the engine looks the tx up once, fetches its
block's receipts once, and decides both settlements in the same block transaction; each gets
its own commit row (its own dependent state and commit_url) and its own signed receipt, built
without another call. A real anvil behind a counting proxy (bench/proxy.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bench.proxy import CountingProxy
from chains.rpc import Web3Transport
from guard.verify import verify_receipt
from tests.integration.receipts_helpers import TxFactory, receipts_for
from tests.support.anvil import Anvil
from tests.support.rigs import Rig, make_watcher
from watcher.settlements import Registration, new_settlement, register
from watcher.store import SettlementRecord

pytestmark = pytest.mark.anvil


@pytest.fixture
def proxied(
    tmp_path: Path, start_anvil: Callable[..., Anvil]
) -> Iterator[tuple[Rig, CountingProxy]]:
    anvil = start_anvil("--no-mining")
    proxy = CountingProxy(anvil.url)
    rig = make_watcher(anvil, f"sqlite:///{tmp_path}/owners.db", transport=Web3Transport(proxy.url))
    yield rig, proxy
    rig.store.close()
    proxy.close()


def _register(rig: Rig, tx: str, owner: str, provisional: bool = False) -> SettlementRecord:
    registration = Registration(
        rig.config,
        tx,
        dependent_state={"for": owner},
        commit_url=f"http://127.0.0.1:9/{owner}",
        owner=owner,
    )
    new = replace(new_settlement(registration, rig.clock()), provisional=provisional)
    rec, created = rig.store.register(new)
    assert created
    return rec


def test_two_callers_of_one_tx_cost_one_lookup_and_one_receipts_call(
    proxied: tuple[Rig, CountingProxy],
) -> None:
    rig, proxy = proxied
    receipts = receipts_for(rig)
    rig.watcher.poll()
    tx = TxFactory(rig.anvil).send(TxFactory(rig.anvil).dynamic())
    alice, bob = _register(rig, tx, "alice"), _register(rig, tx, "bob")
    rig.watcher.poll()  # the probe: sender and nonce of the pending tx
    assert proxy.calls["eth_getTransactionByHash"] == 1
    assert rig.settlement(alice.settlement_id).sender == rig.settlement(bob.settlement_id).sender

    rig.mine_and_poll(1)
    rig.mine_and_poll(2)
    assert proxy.calls["eth_getBlockReceipts"] == 1
    assert proxy.calls["eth_getTransactionByHash"] == 1
    assert proxy.calls["eth_getTransactionReceipt"] == 0
    decided = [rig.settlement(s.settlement_id) for s in (alice, bob)]
    assert [r.verdict for r in decided] == ["FINALITY_CONFIRMED"] * 2
    assert decided[0].block_hash == decided[1].block_hash
    assert decided[0].terminal_at == decided[1].terminal_at  # the same block transaction

    outbox = rig.store.outbox()
    for rec in decided:
        [commit] = outbox.list(settlement_id=rec.settlement_id)
        assert (commit.kind, commit.url) == ("commit", rec.commit_url)
        assert outbox.list(owner=rec.owner) == [commit]
    assert [r.dependent_state for r in decided] == [{"for": "alice"}, {"for": "bob"}]

    start = len(proxy.log)
    receipts.run(rig)
    # The block's one history proof (its confirming block's eth_getProof), shared: the
    # second receipt of the block makes no call.
    assert [m for m, _ in proxy.log[start:]] == ["eth_getProof"], "the second receipt made calls"
    for rec in decided:
        body = receipts.latest(rec.settlement_id)
        verified = verify_receipt(body, trusted_signers=[receipts.signer.address])
        assert verified.facts.block_hash == rec.block_hash
        assert body["settlement_id"] == rec.settlement_id


def test_a_reorg_touches_both_and_both_are_confirmed_again(
    proxied: tuple[Rig, CountingProxy],
) -> None:
    rig, _proxy = proxied
    rig.watcher.poll()
    factory = TxFactory(rig.anvil)
    raw = factory.dynamic()
    tx = factory.send(raw)
    alice, bob = (_register(rig, tx, o, provisional=True) for o in ("alice", "bob"))
    rig.watcher.poll()
    rig.mine_and_poll(1)
    rig.anvil.rpc("anvil_reorg", 1, [["0x" + raw.hex(), 0]])  # re-included on the new branch
    rig.watcher.catch_up()
    [reorg] = rig.store.reorgs()
    assert sorted(reorg.touched) == sorted([alice.settlement_id, bob.settlement_id])
    assert rig.store.reorgs(owner="bob")[0].touched == [bob.settlement_id]
    for rec in (alice, bob):  # the provisional "reorged out" each receiver gets names only its own
        [told] = [
            d
            for d in rig.store.outbox().list(settlement_id=rec.settlement_id)
            if d.idempotency_key.endswith(f":p:reorg:{reorg.id}")
        ]
        assert told.url == rec.commit_url
        assert told.body is not None and rec.settlement_id in json.dumps(told.body)
        other = bob if rec is alice else alice
        assert other.settlement_id not in json.dumps(told.body)
    rig.mine_and_poll(2)
    decided = [rig.settlement(s.settlement_id) for s in (alice, bob)]
    assert [r.verdict for r in decided] == ["FINALITY_CONFIRMED"] * 2
    assert [r.reorg_count for r in decided] == [1, 1]
    assert decided[0].block_hash == decided[1].block_hash == rig.anvil.block(1)["hash"]


def test_a_later_caller_of_a_seen_tx_takes_its_proven_facts_without_a_lookup(
    proxied: tuple[Rig, CountingProxy],
) -> None:
    """Bob registers a tx Alice's settlement already looked up (pending, then included):
    no second eth_getTransactionByHash. Carol's bare word about a sender is not passed on:
    Dave's settlement of her tx is looked up at the node."""
    rig, proxy = proxied
    rig.watcher.poll()
    factory = TxFactory(rig.anvil)
    tx = factory.send(factory.dynamic())
    alice = _register(rig, tx, "alice")
    rig.watcher.poll()
    assert proxy.calls["eth_getTransactionByHash"] == 1
    bob = _register(rig, tx, "bob")  # while pending
    rig.watcher.poll()
    rig.mine_and_poll(1)
    erin = _register(rig, tx, "erin")  # after its inclusion, in a block the tracker holds
    rig.watcher.poll()
    assert proxy.calls["eth_getTransactionByHash"] == 1
    rig.mine_and_poll(2)
    decided = [rig.settlement(s.settlement_id) for s in (alice, bob, erin)]
    assert [r.verdict for r in decided] == ["FINALITY_CONFIRMED"] * 3
    assert len({(r.sender, r.nonce, r.block_hash) for r in decided}) == 1
    assert decided[1].raw_tx == decided[0].raw_tx  # a replacement stays provable for bob

    other = factory.send(factory.dynamic())
    word = Registration(rig.config, other, sender="0x" + "ee" * 20, nonce=99, owner="carol")
    register(rig.store, word, rig.clock())
    dave = _register(rig, other, "dave")
    rig.watcher.poll()
    assert proxy.calls["eth_getTransactionByHash"] == 2  # dave's, at the node
    assert rig.settlement(dave.settlement_id).sender == decided[0].sender
