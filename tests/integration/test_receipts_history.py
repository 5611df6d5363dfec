"""Receipts whose ancestry is proven by the EIP-2935 history contract, on a real anvil.

Anvil's default hardfork has the contract (0x0000F908…2935); a Cancun anvil has none. The
watcher follows each chain through a counting proxy (bench/proxy.py), the receipts
component builds the receipts as the daemon does, and ``finality verify`` checks them as a
process. What is measured: the size of a depth-600 receipt, the calls building costs (one
``eth_getProof`` per confirming block, whatever the number of its receipts), and the
fallback to the header chain where the contract cannot serve (no contract; beyond its
8,191 blocks), said in ``proof.ancestry``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.proxy import CountingProxy
from chains.rpc import RpcClient, Web3Transport
from guard.canonical import canonical_json
from guard.headers import header_json
from guard.verify import verify_receipt
from tests.integration.receipts_helpers import (
    SIGNING_KEY,
    Receipts,
    TxFactory,
    receipts_for,
)
from tests.support.anvil import Anvil
from tests.support.daemon import run_cli
from tests.support.faulty_proxy import FaultyProxy
from tests.support.rigs import Rig, make_watcher
from watcher.receipts.ancestry import Ancestry, AncestryProver
from watcher.receipts.builder import ReceiptBuilder
from watcher.receipts.component import ReceiptIssuer
from watcher.receipts.signer import Signer
from watcher.store.receipts_store import receipt_store

pytestmark = pytest.mark.anvil

HISTORY_ADDRESS = "0x0000F90827F1C53a10cb7A02335B175320002935"

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "real-blocks"


def _rig(anvil: Anvil, proxy: CountingProxy, db: Path, confirmations: int, **kw: Any) -> Rig:
    rig = make_watcher(
        anvil,
        f"sqlite:///{db}",
        transport=Web3Transport(proxy.url),
        confirmations=confirmations,
        **kw,
    )
    rig.watcher.poll()
    return rig


def _block_of_watched_txs(rig: Rig, count: int, **register: Any) -> list[str]:
    """``count`` watched txs mined in one block; their settlement ids."""
    factories = [TxFactory(rig.anvil, account) for account in range(3)]
    ids = [
        rig.register(factories[i % 3].send(factories[i % 3].dynamic()), **register).settlement_id
        for i in range(count)
    ]
    rig.watcher.poll()
    rig.mine_and_poll(1)
    return ids


def _build(rig: Rig, proxy: CountingProxy, receipts: Receipts) -> list[str]:
    """Run the receipts component once; the methods it called."""
    start = len(proxy.log)
    receipts.run(rig)
    return [method for method, _ in proxy.log[start:]]


@pytest.fixture(scope="module")
def prague(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Rig, CountingProxy]]:
    """Anvil's default hardfork (the contract is there), N = 600 by default."""
    anvil = Anvil("--no-mining")
    proxy = CountingProxy(anvil.url)
    rig = _rig(anvil, proxy, tmp_path_factory.mktemp("history") / "h.db", 600)
    yield rig, proxy
    rig.store.close()
    proxy.close()
    anvil.stop()


def test_the_contract_holds_the_parent_hashes_of_the_blocks_below_h(
    prague: tuple[Rig, CountingProxy],
) -> None:
    """EIP-2935 as anvil runs it: in block H's state, slot (H - 1) mod 8191 holds H - 1's
    hash (the system call at the start of H wrote its parent's), slot H mod 8191 nothing yet."""
    rig, _ = prague
    rig.anvil.mine(3)
    head = rig.anvil.head()
    tag = hex(head)

    def slot(n: int) -> str:
        return str(rig.anvil.rpc("eth_getStorageAt", HISTORY_ADDRESS, hex(n % 8191), tag))

    assert int(slot(head - 1), 16) == int(rig.anvil.block(head - 1)["hash"], 16)
    assert int(slot(head - 3), 16) == int(rig.anvil.block(head - 3)["hash"], 16)
    assert int(slot(head), 16) == 0
    rig.watcher.catch_up()


def test_a_depth_600_receipt_is_under_10_kb_verified_offline_one_call_per_block(
    prague: tuple[Rig, CountingProxy], tmp_path: Path
) -> None:
    rig, proxy = prague
    receipts = receipts_for(rig)
    ids = _block_of_watched_txs(rig, 3)
    rig.mine_and_poll(599)
    assert all(rig.settlement(sid).verdict == "FINALITY_CONFIRMED" for sid in ids)

    assert _build(rig, proxy, receipts) == ["eth_getProof"]  # one, shared by the three
    for sid in ids:
        receipt = receipts.latest(sid)
        assert receipt["proof"]["ancestry"]["kind"] == "history_storage"
        assert len(receipt["proof"]["headers"]) == 1
        assert len(canonical_json(receipt)) <= 10_000
        verified = verify_receipt(receipt, trusted_signers=[receipts.signer.address])
        assert verified.facts.confirmations == 600
        head = verified.anchor
        assert head is not None and rig.anvil.block(head[0])["hash"] == head[1]

    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipts.latest(ids[0])))
    checked = run_cli("verify", str(path), "--signer", receipts.signer.address)
    assert checked.returncode == 0, checked.stderr
    assert "depth 600" in checked.stdout and "ancestry history_storage" in checked.stdout


def test_a_depth_12_receipt_is_smaller_than_its_header_chain(
    prague: tuple[Rig, CountingProxy],
) -> None:
    rig, proxy = prague
    receipts = receipts_for(rig)
    [sid] = _block_of_watched_txs(rig, 1, confirmations=12)
    rig.mine_and_poll(11)
    assert _build(rig, proxy, receipts) == ["eth_getProof"]
    proven = receipts.latest(sid)
    assert proven["proof"]["ancestry"]["kind"] == "history_storage"

    headers_only = rig.config.model_copy(update={"receipt_ancestry": "headers"})
    builder = ReceiptBuilder(headers_only, rig.client, receipts.signer.address)
    chained = receipts.signer.sign(builder.decision_body(rig.settlement(sid), rig.clock()))
    assert "ancestry" not in chained["proof"] and len(chained["proof"]["headers"]) == 12
    assert len(canonical_json(proven)) < len(canonical_json(chained)) / 2
    assert verify_receipt(chained).facts.confirmations == 12

    compact = rig.config.model_copy(update={"receipt_headers": "compact"})
    builder = ReceiptBuilder(compact, rig.client, receipts.signer.address)
    small = receipts.signer.sign(builder.decision_body(rig.settlement(sid), rig.clock()))
    assert small["proof"]["ancestry"]["kind"] == "history_storage"
    assert "header_chain" in small["proof"]  # the inclusion header alone, compact
    assert verify_receipt(small).facts.confirmations == 12
    assert len(canonical_json(small)) < len(canonical_json(proven))


def test_a_blocks_receipts_read_its_two_ends_from_the_store_once(
    prague: tuple[Rig, CountingProxy],
) -> None:
    """The ends a history proof links (blocks B and H) are read once for all of a block's
    receipts, not per receipt (read per receipt, they were the largest cost of a block's
    100 receipts)."""
    rig, proxy = prague
    reads: list[tuple[int, int]] = []

    def header_rows(chain: str, first: int, last: int) -> list[tuple[int, str, str, bytes | None]]:
        reads.append((first, last))
        return rig.store.compact_headers(chain, first, last)

    signer = Signer(SIGNING_KEY, "env")
    store = receipt_store(rig.store)
    store.use_signer(signer.address, signer.source, rig.clock())
    builder = ReceiptBuilder(rig.config, rig.client, signer.address, header_rows)
    receipts = Receipts(
        ReceiptIssuer(signer, store, {rig.config.name: builder}, rig.clock), store, signer
    )
    ids = _block_of_watched_txs(rig, 5, confirmations=12)
    rig.mine_and_poll(11)

    assert _build(rig, proxy, receipts) == ["eth_getProof"]
    for sid in ids:
        assert receipts.latest(sid)["proof"]["ancestry"]["kind"] == "history_storage"
    assert len(reads) <= 3, reads  # B, H (and the decision's head, when another block)


def test_a_blocks_header_chain_fetched_from_the_node_is_fetched_once(
    prague: tuple[Rig, CountingProxy],
) -> None:
    """When the store's window no longer holds a block's headers (a daemon that fell behind
    builds its receipts late), the chain comes from the node once for all of the block's
    receipts, as the stored one is read once (fetched per receipt, it was a batch of N
    blocks for each of a block's 100 settlements, which put the daemon further behind)."""
    rig, proxy = prague
    signer = Signer(SIGNING_KEY, "env")
    store = receipt_store(rig.store)
    store.use_signer(signer.address, signer.source, rig.clock())

    def window_passed(
        chain: str, first: int, last: int
    ) -> list[tuple[int, str, str, bytes | None]]:
        return []

    builder = ReceiptBuilder(rig.config, rig.client, signer.address, window_passed)
    receipts = Receipts(
        ReceiptIssuer(signer, store, {rig.config.name: builder}, rig.clock), store, signer
    )
    ids = _block_of_watched_txs(rig, 5, confirmations=12)
    rig.mine_and_poll(11)

    methods = _build(rig, proxy, receipts)
    assert methods.count("eth_getBlockByNumber") == 12, methods  # B .. H, once
    for sid in ids:
        receipt = receipts.latest(sid)
        assert receipt["proof"]["ancestry"]["kind"] == "history_storage"
        assert verify_receipt(receipt, trusted_signers=[signer.address]).facts.confirmations == 12


def test_without_the_contract_the_header_chain_says_so_and_is_not_asked_again(
    start_anvil: Callable[..., Anvil], tmp_path: Path
) -> None:
    anvil = start_anvil("--no-mining", "--hardfork", "cancun")
    proxy = CountingProxy(anvil.url)
    try:
        rig = _rig(anvil, proxy, tmp_path / "c.db", 12)
        receipts = receipts_for(rig)
        first = _block_of_watched_txs(rig, 2)
        second = _block_of_watched_txs(rig, 1)
        rig.mine_and_poll(11)
        # The first confirming block shows no contract; the next is not asked.
        assert _build(rig, proxy, receipts) == ["eth_getProof"]
        for sid in first + second:
            receipt = receipts.latest(sid)
            assert receipt["proof"]["ancestry"] == {
                "kind": "header_chain",
                "reason": "no_history_contract",
            }
            verified = verify_receipt(receipt)
            assert verified.facts.confirmations == len(receipt["proof"]["headers"]) == 12
            assert verified.facts.ancestry == "header_chain (no_history_contract)"
        rig.store.close()
    finally:
        proxy.close()


def _mainnet_header(name: str) -> dict[str, str]:
    data = json.loads((VECTORS / f"{name}.json").read_text())
    return header_json(data["block"])


def test_beyond_8191_blocks_the_header_chain_is_chosen_without_a_call(
    prague: tuple[Rig, CountingProxy],
) -> None:
    """Block H's state holds the hashes of the 8,191 blocks below it only: for mainnet
    blocks 18,000,000 and 20,000,000 (real headers) the prover picks the header chain and
    says why before asking anything. (Mining 9,000 anvil blocks and building their receipt
    takes minutes here: bench/receipt_size.py measures depth 8,000 and 9,000 instead.)"""
    _, proxy = prague
    prover = AncestryProver(RpcClient(Web3Transport(proxy.url)), compact=True)
    block, head = _mainnet_header("eth-18000000"), _mainnet_header("eth-20000000-raw")
    start = len(proxy.log)
    assert prover.prove(block, head, 2_000_001) == Ancestry(None, "beyond_history_window")
    assert proxy.log[start:] == []


def _wrong_slot_value(answer: Any) -> Any:
    """The node's eth_getProof answer with the slot's leaf changed (another word in it), the
    value it states left as it was."""
    entry = answer["storageProof"][0]
    leaf = entry["proof"][-1]
    entry["proof"][-1] = leaf[:-2] + ("00" if leaf[-2:] != "00" else "01")
    return answer


def test_a_node_that_refuses_or_forges_the_proof_gets_the_header_chain(
    start_anvil: Callable[..., Anvil], tmp_path: Path
) -> None:
    """Never signed on the node's word: a refused eth_getProof (a state the node no longer
    keeps), or a proof whose leaf was changed, gives the header chain (reason
    ``unavailable``) and a receipt that verifies; the node is asked again next time."""
    anvil = start_anvil("--no-mining")
    proxy = FaultyProxy(anvil.url)
    try:
        rig = make_watcher(
            anvil,
            f"sqlite:///{tmp_path}/f.db",
            transport=Web3Transport(proxy.url),
            confirmations=12,
        )
        rig.watcher.poll()
        receipts = receipts_for(rig)
        [refused] = _block_of_watched_txs(rig, 1)
        [forged] = _block_of_watched_txs(rig, 1)
        [honest] = _block_of_watched_txs(rig, 1)
        rig.mine_and_poll(9)  # the first block at depth 12
        proxy.refuse = {"eth_getProof"}
        receipts.run(rig)
        proxy.clear()
        proxy.rewrite = {"eth_getProof": _wrong_slot_value}
        rig.mine_and_poll(1)
        receipts.run(rig)
        proxy.clear()
        rig.mine_and_poll(1)
        receipts.run(rig)
        for sid, reason in ((refused, "unavailable"), (forged, "unavailable"), (honest, None)):
            receipt = receipts.latest(sid)
            verified = verify_receipt(receipt)
            assert verified.facts.confirmations == 12
            if reason is None:
                assert receipt["proof"]["ancestry"]["kind"] == "history_storage"
            else:
                assert receipt["proof"]["ancestry"] == {"kind": "header_chain", "reason": reason}
        assert proxy.calls["eth_getProof"] == 3
        rig.store.close()
    finally:
        proxy.close()
