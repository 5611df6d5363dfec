"""What a receipt costs at the wire: no header the tracker already had, no second receipts call.

A real anvil behind a counting proxy (bench/proxy.py logs every call with its params). The
watcher follows the chain through the proxy; the receipts component then builds the
finality receipts of every watched tx. The tracker already fetched each block of the header
chain a receipt carries, and the engine already fetched the block's ``eth_getBlockReceipts``:
building must not ask the node for either again, and the receipts must still
verify offline against the chain the node now has.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bench.proxy import CountingProxy
from chains.rpc import RpcClient, Web3Transport
from guard.hashing import keccak256
from guard.verify import verify_receipt
from tests.integration.receipts_helpers import GWEI, TxFactory, receipts_for
from tests.support.anvil import Anvil
from tests.support.rigs import Rig, make_watcher
from watcher.api.sender_facts import sender_facts
from watcher.receipts.builder import ReceiptBuilder
from watcher.settlements import Registration, register

pytestmark = pytest.mark.anvil

HEADER_METHODS = ("eth_getBlockByNumber", "eth_getBlockByHash", "eth_getHeaderByNumber")


@pytest.fixture
def proxied(
    tmp_path: Path, start_anvil: Callable[..., Anvil]
) -> Iterator[tuple[Rig, CountingProxy]]:
    anvil = start_anvil("--no-mining")
    proxy = CountingProxy(anvil.url)
    rig = make_watcher(
        anvil,
        f"sqlite:///{tmp_path}/cost.db",
        transport=Web3Transport(proxy.url),
        confirmations=12,
    )
    yield rig, proxy
    rig.store.close()
    proxy.close()


def _block_key(method: str, params: list[object]) -> str:
    """Which block a header call asks for: its number (as an int string) or hash."""
    tag = str(params[0]) if params else "?"
    if method == "eth_getBlockByNumber" and tag.startswith("0x"):
        return str(int(tag, 16))
    return tag


def _tracked(rig: Rig, proxy: CountingProxy) -> set[str]:
    """Blocks (number and hash) the tracker has fetched so far."""
    numbers = {
        _block_key(m, p) for m, p in proxy.log if m in HEADER_METHODS and _block_key(m, p).isdigit()
    }
    hashes = {h for _n, h, _p, _ts in rig.store.headers(rig.config.name)}
    held = {str(n) for n, _h, _p, _ts in rig.store.headers(rig.config.name)}
    return numbers | hashes | held


def _two_blocks_of_watched_txs(rig: Rig, per_block: int) -> list[str]:
    """``per_block`` watched txs mined in each of blocks 1 and 2, then depth 12 reached."""
    factories = [TxFactory(rig.anvil, account) for account in range(3)]
    ids: list[str] = []
    for _ in range(2):
        for i in range(per_block):
            tx = factories[i % 3].send(factories[i % 3].dynamic())
            ids.append(rig.register(tx).settlement_id)
        rig.watcher.poll()  # seen pending (sender and nonce)
        rig.mine_and_poll(1)
    rig.mine_and_poll(11)
    assert all(rig.settlement(sid).verdict == "FINALITY_CONFIRMED" for sid in ids)
    return ids


def test_receipts_fetch_no_header_the_tracker_had_and_no_receipts_twice(
    proxied: tuple[Rig, CountingProxy],
) -> None:
    rig, proxy = proxied
    receipts = receipts_for(rig)  # subscribed before the blocks are tracked, as in the daemon
    rig.watcher.poll()
    ids = _two_blocks_of_watched_txs(rig, per_block=6)
    tracked = _tracked(rig, proxy)
    engine_receipts = proxy.calls["eth_getBlockReceipts"]
    assert engine_receipts == 2  # the engine's, one per block holding a watched tx

    start = len(proxy.log)
    receipts.run(rig)
    during = proxy.log[start:]

    refetched = [(m, p) for m, p in during if m in HEADER_METHODS and _block_key(m, p) in tracked]
    assert not refetched, f"{len(refetched)} headers the tracker had fetched again: {refetched[:3]}"
    # One eth_getProof of the history contract per confirming block, shared by its six
    # receipts (their ancestry proof: watcher/receipts/ancestry.py); no other call.
    assert [m for m, _ in during] == ["eth_getProof"] * 2, "building receipts made calls"
    for sid in ids:
        verified = verify_receipt(receipts.latest(sid), trusted_signers=[receipts.signer.address])
        assert verified.facts.confirmations == 12
        number = verified.facts.block_number
        assert number is not None
        assert verified.facts.block_hash == rig.anvil.block(number)["hash"]  # the final chain


def test_after_a_restart_receipts_read_headers_from_the_store(
    proxied: tuple[Rig, CountingProxy],
) -> None:
    rig, proxy = proxied
    rig.watcher.poll()
    ids = _two_blocks_of_watched_txs(rig, per_block=3)
    tracked = _tracked(rig, proxy)

    rig.restart(RpcClient(Web3Transport(proxy.url)))  # nothing held in memory any more
    receipts = receipts_for(rig)
    start = len(proxy.log)
    receipts.run(rig)
    during = proxy.log[start:]

    numbers = [p for m, p in during if m in ("eth_getBlockByNumber", "eth_getHeaderByNumber")]
    assert not numbers, f"{len(numbers)} headers fetched again after a restart: {numbers[:3]}"
    # Per block of watched txs: its receipts and its txs, once each, whatever N; and the
    # history proof of its confirming block.
    assert sorted(m for m, _ in during) == sorted(
        ["eth_getBlockReceipts", "eth_getBlockByHash", "eth_getProof"] * 2
    )
    assert all(_block_key(m, p) in tracked for m, p in during if m != "eth_getProof")
    for sid in ids:
        verify_receipt(receipts.latest(sid), trusted_signers=[receipts.signer.address])


def _register_known(rig: Rig, raw: bytes) -> str:
    """Register the tx of ``raw`` with its signed bytes (sender and nonce checked from them)."""
    known = sender_facts("0x" + keccak256(raw).hex(), raw_tx="0x" + raw.hex())
    rec, _ = register(
        rig.store,
        Registration(
            rig.config,
            "0x" + keccak256(raw).hex(),
            sender=known.sender,
            nonce=known.nonce,
            raw_tx=known.raw_tx,
        ),
        rig.clock(),
    )
    return rec.settlement_id


def test_a_registration_with_its_signed_tx_is_never_looked_up(
    proxied: tuple[Rig, CountingProxy],
) -> None:
    """Registered before it is sent and after it is mined, with raw_tx: no lookup by hash,
    and the replacement of a third stays provable from the registered bytes."""
    rig, proxy = proxied
    rig.watcher.poll()
    factory = TxFactory(rig.anvil)
    before = factory.dynamic()
    early = _register_known(rig, before)  # not sent yet
    rig.watcher.poll()
    factory.send(before)
    mined_first = factory.dynamic()
    factory.send(mined_first)
    rig.watcher.poll()
    rig.mine_and_poll(1)
    late = _register_known(rig, mined_first)  # registered after it was mined
    victim = factory.dynamic(max_fee=10 * GWEI)
    _register_known(rig, victim)
    rig.watcher.poll()
    factory.send(victim)
    factory.nonce -= 1  # the same nonce, a higher fee: the node drops the victim
    factory.send(factory.dynamic(max_fee=20 * GWEI))
    rig.mine_and_poll(12)

    assert proxy.calls["eth_getTransactionByHash"] == 0
    assert proxy.calls["eth_getRawTransactionByHash"] == 0
    assert proxy.calls["eth_getTransactionReceipt"] == 0
    assert rig.settlement(early).verdict == "FINALITY_CONFIRMED"
    assert rig.settlement(late).verdict == "FINALITY_CONFIRMED"
    failed = rig.store.settlement_by_tx(rig.config.name, "0x" + keccak256(victim).hex())
    assert failed.verdict == "SETTLEMENT_FAILED"
    receipts = receipts_for(rig)
    receipts.run(rig)
    verified = verify_receipt(receipts.latest(failed.settlement_id))
    assert verified.claims == ()  # sender and nonce proven from both signatures


def test_a_probe_costs_one_call_per_tx(proxied: tuple[Rig, CountingProxy]) -> None:
    """Pending txs registered without their facts: one eth_getTransactionByHash each, their
    signed bytes rebuilt from the answer (no eth_getRawTransactionByHash)."""
    rig, proxy = proxied
    rig.watcher.poll()
    factories = [TxFactory(rig.anvil, account) for account in range(3)]
    sent = [factories[i % 3].dynamic() for i in range(9)]
    ids = [rig.register(factories[0].send(raw)).settlement_id for raw in sent]
    start = len(proxy.log)
    rig.watcher.poll()
    methods = [m for m, _ in proxy.log[start:]]
    assert methods.count("eth_getTransactionByHash") == 9
    assert "eth_getRawTransactionByHash" not in methods
    for sid, raw in zip(ids, sent, strict=True):
        assert rig.settlement(sid).raw_tx == "0x" + raw.hex()


def test_a_tx_registered_after_its_block_was_followed_costs_no_lookup(
    proxied: tuple[Rig, CountingProxy],
) -> None:
    """Registered by hash alone after the tracker fetched its block whole: the block's tx
    object is what ``eth_getTransactionByHash`` would answer, so nothing is asked; sender
    and nonce are still proven by the signature (the receipt claims nothing on the
    caller's word), and the verdict is the one a lookup gives."""
    rig, proxy = proxied
    rig.watcher.poll()
    factories = [TxFactory(rig.anvil, account) for account in range(3)]
    hashes = [f.send(f.dynamic()) for f in factories]
    rig.mine_and_poll(1)  # followed while nothing watched its txs
    start = len(proxy.log)
    ids = [rig.register(h).settlement_id for h in hashes]
    rig.watcher.poll()
    methods = [m for m, _ in proxy.log[start:]]
    assert "eth_getTransactionByHash" not in methods, methods
    assert "eth_getTransactionReceipt" not in methods, methods
    block = rig.anvil.rpc("eth_getBlockByNumber", "latest", False)
    for sid, factory in zip(ids, factories, strict=True):
        rec = rig.settlement(sid)
        assert (rec.block_number, rec.block_hash) == (int(block["number"], 16), block["hash"])
        assert (rec.sender or "").lower() == factory.account.address.lower()
        assert rec.nonce == factory.nonce - 1
    rig.mine_and_poll(11)
    receipts = receipts_for(rig)
    receipts.run(rig)
    for sid in ids:
        assert rig.settlement(sid).verdict == "FINALITY_CONFIRMED"
        assert verify_receipt(receipts.latest(sid)).claims == ()


def test_a_tx_seen_only_in_a_block_a_reorg_took_away_is_asked_of_the_node(
    proxied: tuple[Rig, CountingProxy],
) -> None:
    """The tracker fetched the tx's block, then a reorg replaced it with a block holding
    another tx of the same nonce: the held tx object names a block that is no longer the
    chain, so the registration asks the node, and is not recorded in the lost block."""
    rig, proxy = proxied
    rig.watcher.poll()
    factory = TxFactory(rig.anvil)
    lost = factory.send(factory.dynamic())
    rig.mine_and_poll(1)
    lost_block = rig.anvil.rpc("eth_getBlockByNumber", "latest", False)["hash"]
    factory.nonce -= 1  # the same nonce: the lost tx can never be included again
    rig.anvil.reorg(1, [("0x" + factory.dynamic(max_fee=20 * GWEI).hex(), 0)])
    rig.watcher.poll()  # the window now holds the new block at that height
    assert rig.anvil.rpc("eth_getBlockByNumber", "latest", False)["hash"] != lost_block
    start = len(proxy.log)
    sid = rig.register(lost).settlement_id
    rig.watcher.poll()
    asked = [p for m, p in proxy.log[start:] if m == "eth_getTransactionByHash"]
    assert asked == [[lost]]
    rec = rig.settlement(sid)
    assert rec.block_hash is None and rec.verdict != "FINALITY_CONFIRMED"


def test_compact_header_chains_verify_at_half_the_size(
    proxied: tuple[Rig, CountingProxy],
) -> None:
    """``receipt_headers = "compact"``: the same receipt with ``proof.header_chain``; it
    verifies offline and its 12 headers take about half the bytes of ``proof.headers``."""
    rig, _proxy = proxied
    receipts = receipts_for(rig)
    rig.watcher.poll()
    [sid, *_] = _two_blocks_of_watched_txs(rig, per_block=1)
    compact_config = rig.config.model_copy(update={"receipt_headers": "compact"})
    rec = rig.settlement(sid)
    bodies = {
        kind: ReceiptBuilder(
            config, rig.client, receipts.signer.address, rig.store.compact_headers
        ).decision_body(rec, rig.clock())
        for kind, config in (("list", rig.config), ("compact", compact_config))
    }
    assert "headers" in bodies["list"]["proof"] and "header_chain" not in bodies["list"]["proof"]
    assert bodies["compact"]["proof"]["header_chain"]["format"] == "rlp-linked/1"
    listed, compact = (
        verify_receipt(receipts.signer.sign(bodies[k]), trusted_signers=[receipts.signer.address])
        for k in ("list", "compact")
    )
    assert compact.facts == listed.facts  # the same block, depth, anchor, status
    sizes = {
        k: len(json.dumps(b["proof"]["headers" if k == "list" else "header_chain"]))
        for k, b in bodies.items()
    }
    assert sizes["compact"] < 0.55 * sizes["list"], sizes


def test_a_later_receipt_of_a_proven_block_needs_no_call_after_a_restart(
    proxied: tuple[Rig, CountingProxy],
) -> None:
    """Two settlements in one block, N = 3 and N = 12: the first receipt stores the block's
    leaves; after a restart the second is built from them, with no call for the block (its
    confirming block's history proof aside)."""
    rig, proxy = proxied
    rig.watcher.poll()
    factory = TxFactory(rig.anvil)
    early = rig.register(factory.send(factory.dynamic()), confirmations=3).settlement_id
    late = rig.register(factory.send(factory.dynamic())).settlement_id
    rig.watcher.poll()
    rig.mine_and_poll(3)
    receipts_for(rig).run(rig)
    assert rig.settlement(early).verdict == "FINALITY_CONFIRMED"

    rig.restart(RpcClient(Web3Transport(proxy.url)))
    receipts = receipts_for(rig)
    rig.mine_and_poll(9)
    assert rig.settlement(late).verdict == "FINALITY_CONFIRMED"
    start = len(proxy.log)
    receipts.run(rig)
    assert [m for m, _ in proxy.log[start:]] == ["eth_getProof"]  # its confirming block's
    verified = verify_receipt(receipts.latest(late), trusted_signers=[receipts.signer.address])
    assert verified.facts.confirmations == 12
    assert verified.facts.block_number == rig.settlement(early).block_number


def test_the_first_receipt_of_a_block_after_a_restart_needs_no_call(
    proxied: tuple[Rig, CountingProxy],
) -> None:
    """The receipts thread builds a block's tries as soon as the engine fetched its receipts
    (it holds watched txs) and stores its leaves: a daemon restarted before depth N builds
    the block's first receipts from them and the stored headers, without a call for the block
    (it used to ask for the block's receipts and its 2 MB of tx objects: 137-171 ms on
    anvil); only the confirming block's history proof is asked."""
    rig, proxy = proxied
    receipts = receipts_for(rig)  # the daemon's component exists from the start
    rig.watcher.poll()
    factories = [TxFactory(rig.anvil, account) for account in range(3)]
    ids = [
        rig.register(factories[i % 3].send(factories[i % 3].dynamic())).settlement_id
        for i in range(6)
    ]
    rig.watcher.poll()
    rig.mine_and_poll(1)
    receipts.run(rig)  # after the poll that saw the block: nothing final yet
    assert all(rig.settlement(sid).verdict == "AWAITING_FINALITY" for sid in ids)

    rig.restart(RpcClient(Web3Transport(proxy.url)))
    again = receipts_for(rig)
    rig.mine_and_poll(11)
    assert all(rig.settlement(sid).verdict == "FINALITY_CONFIRMED" for sid in ids)
    start = len(proxy.log)
    again.run(rig)
    assert [m for m, _ in proxy.log[start:]] == ["eth_getProof"]  # its confirming block's
    for sid in ids:
        verified = verify_receipt(again.latest(sid), trusted_signers=[again.signer.address])
        assert verified.facts.confirmations == 12
