"""What a receipt costs at the wire: no header the tracker already had, no second receipts call.

A real anvil behind a counting proxy (bench/proxy.py logs every call with its params). The
watcher follows the chain through the proxy; the receipts component then builds the
finality receipts of every watched tx. The tracker already fetched each block of the header
chain a receipt carries, and the engine already fetched the block's ``eth_getBlockReceipts``:
building must not ask the node for either again (issue 11), and the receipts must still
verify offline against the chain the node now has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bench.proxy import CountingProxy
from chains.rpc import RpcClient, Web3Transport
from guard.verify import verify_receipt
from tests.integration.helpers import Rig, make_watcher
from tests.integration.receipts_helpers import TxFactory, receipts_for
from tests.support.anvil import Anvil

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
    assert [m for m, _ in during] == [], "building receipts made calls"
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
    # Per block of watched txs: its receipts and its txs, once each, whatever N.
    assert sorted(m for m, _ in during) == sorted(
        ["eth_getBlockReceipts", "eth_getBlockByHash"] * 2
    )
    assert all(_block_key(m, p) in tracked for m, p in during)
    for sid in ids:
        verify_receipt(receipts.latest(sid), trusted_signers=[receipts.signer.address])
