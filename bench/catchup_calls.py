"""What a daemon's catch-up asks the node: every call counted by method, blocks asked twice.

``python -m bench.catchup_calls [--blocks 2000] [--txs 100]``: a real anvil behind the
counting proxy (bench/proxy.py); ``finality run`` as shipped (a process: header checks on,
receipts on) follows it, ``--txs`` signed txs are registered before they are sent, the
daemon stops (SIGTERM), the txs are mined spread over ``--blocks`` blocks, and the daemon
starts again. Counted from that start until every watched tx is ``FINALITY_CONFIRMED`` at
the block the node says and the daemon's head is the node's: the calls by method, how many
blocks were asked for more than once (by number or by hash, full or not), and how many
blocks' receipts more than once. What is necessary: each block once, the receipts of each
watched block once.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from eth_account import Account
from eth_utils.address import to_checksum_address

from bench.proxy import CountingProxy
from guard.settlement import Verdict
from tests.support.anvil import Anvil
from tests.support.daemon import Daemon

DEV_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
"""Anvil's first account (a public test key, worthless)."""

BLOCK_METHODS = ("eth_getBlockByNumber", "eth_getBlockByHash")


@dataclass(frozen=True)
class CatchUpCalls:
    """What the node was asked during one catch-up."""

    calls: Counter[str]
    """JSON-RPC calls by method (a batch of k counts k)."""
    blocks_twice: dict[str, int]
    """Block (hash) → times asked with its txs, for each asked so more than once."""
    headers_again: dict[str, int]
    """Block → times asked in any form, for each asked more than once otherwise (a
    receipt's header chain read from the node: watcher/receipts/headers.py)."""
    receipts_twice: dict[str, int]
    """Block → ``eth_getBlockReceipts`` of it, for each asked more than once."""
    blocks: int
    """Blocks caught up."""
    watched_blocks: int
    """Blocks holding a watched tx."""
    seconds: float
    """Wall time from the start to the last verdict."""


def signed_txs(anvil: Anvil, count: int) -> list[tuple[str, str]]:
    """(tx hash, raw) of ``count`` value transfers from the first account, not sent."""
    account = Account.from_key(DEV_KEY)
    nonce = int(anvil.rpc("eth_getTransactionCount", account.address, "pending"), 16)
    out: list[tuple[str, str]] = []
    for i in range(count):
        tx = {
            "chainId": 31337,
            "nonce": nonce + i,
            "to": to_checksum_address(anvil.accounts[1]),
            "value": 1,
            "gas": 21_000,
            "maxFeePerGas": 10 * 10**9,
            "maxPriorityFeePerGas": 1,
        }
        signed = Account.sign_transaction(tx, DEV_KEY)
        out.append(
            ("0x" + signed.hash.hex().removeprefix("0x"), "0x" + signed.raw_transaction.hex())
        )
    return out


def wait(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Until ``check()`` is true (polls the world; fails after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.1)


def measure(workdir: Path, blocks: int, txs: int, timeout: float = 600.0) -> CatchUpCalls:
    """One catch-up of ``blocks`` blocks with ``txs`` watched txs spread over them."""
    anvil = Anvil()
    proxy = CountingProxy(anvil.url)
    daemon = Daemon(workdir, proxy.url, heads="poll")
    try:
        anvil.mine(5)
        daemon.wait_head(anvil.head(), timeout=60)
        pending = signed_txs(anvil, txs)
        ids = {h: daemon.register(h, timeout_s=86_400)["settlement_id"] for h, _ in pending}
        daemon.terminate()
        gap = blocks // txs
        included: dict[str, int] = {}
        for tx_hash, raw in pending:
            anvil.rpc("eth_sendRawTransaction", raw)  # automined: one block
            included[tx_hash] = int(anvil.receipt(tx_hash)["blockNumber"], 16)
            anvil.mine(gap - 1)
        head = anvil.head()
        with proxy._lock:
            proxy.calls.clear()
            proxy.log.clear()
        started = time.monotonic()
        daemon.start()

        def done() -> bool:
            if daemon.head() != head:
                return False
            views = [daemon.settlement(i) for i in ids.values()]
            return all(  # its receipt built too: what the receipts component asks is counted
                v["verdict"] == Verdict.FINALITY_CONFIRMED.value and v["receipt"] is not None
                for v in views
            )

        wait(done, timeout, "the catch-up did not end")
        seconds = time.monotonic() - started
        for tx_hash, sid in ids.items():
            view = daemon.settlement(sid)
            assert view["block_number"] == included[tx_hash], view
        with proxy._lock:
            log = list(proxy.log)
            calls = Counter(proxy.calls)
        hash_of = block_hashes(anvil, head)
        full_twice = asked_twice(log, hash_of, full=True)
        return CatchUpCalls(
            calls=calls,
            blocks_twice=full_twice,
            headers_again={
                k: n for k, n in asked_twice(log, hash_of).items() if k not in full_twice
            },
            receipts_twice=_more_than_once(
                str(p[0]).lower() for m, p in log if m == "eth_getBlockReceipts"
            ),
            blocks=blocks,
            watched_blocks=len(set(included.values())),
            seconds=seconds,
        )
    finally:
        daemon.close()
        proxy.close()
        anvil.stop()


def block_hashes(anvil: Anvil, last: int) -> dict[int, str]:
    """Number → hash (lower case) of blocks 0 .. ``last`` (asked of the node directly)."""
    return {
        n: str(anvil.rpc("eth_getBlockByNumber", hex(n), False)["hash"]).lower()
        for n in range(last + 1)
    }


def asked_twice(
    log: Sequence[tuple[str, list[object]]], hash_of: Mapping[int, str], *, full: bool | None = None
) -> dict[str, int]:
    """Each block asked for more than once (by number, ``hash_of`` naming its hash, or by
    hash), by hash: among the asks with full txs (``full=True``: the tracker's and the
    engine's), with hashes only (``False``: a receipt's header chain read from the node), or
    all (None). A tag (``latest``, ``finalized``) counts as what it asks for, not as a
    block."""
    asked: list[str] = []
    for method, params in log:
        if method not in BLOCK_METHODS or not params:
            continue
        if full is not None and (len(params) > 1 and params[1] is True) != full:
            continue
        key = str(params[0]).lower()
        if method == "eth_getBlockByNumber":
            if not key.startswith("0x"):
                continue
            key = hash_of[int(key, 16)]
        asked.append(key)
    return _more_than_once(asked)


def _more_than_once(keys: Iterable[str]) -> dict[str, int]:
    counted = Counter(keys)
    return {k: n for k, n in counted.items() if n > 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=2000)
    parser.add_argument("--txs", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(Path(tmp), args.blocks, args.txs)
    load = os.getloadavg()[0]
    print(
        f"catch-up of {result.blocks} blocks, {result.watched_blocks} watched blocks, "
        f"{result.seconds:.1f} s wall, load {load:.1f}"
    )
    for method, n in sorted(result.calls.items()):
        print(f"  {method:32} {n}")
    print(f"  total {sum(result.calls.values())}")
    print(f"blocks asked with their txs more than once: {len(result.blocks_twice)}")
    print(f"blocks asked again for their header alone: {len(result.headers_again)}")
    print(f"blocks whose receipts were asked more than once: {len(result.receipts_twice)}")


if __name__ == "__main__":
    main()
