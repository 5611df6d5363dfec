"""What standing address watches cost per block, run by hand:
``.venv/bin/python -m bench.deposits_cost [--addresses 100000] [--deposits 1000] [--blocks 12]
[--profile DIR]``.

A real anvil (gas limit raised, mining on demand) with a real ERC-20, every call counted by
a proxy in front of it (bench/proxy.py). One subscription watches ``--addresses`` addresses
for the native coin and the token; then, ``--blocks`` times: ``--deposits`` transfers to
watched addresses are sent (half native value transfers from the node's accounts, half
``Transfer`` logs of one ``transferMany`` tx) and mined in one block, and the watcher polls
once. Printed per poll: JSON-RPC calls (by method), CPU seconds of the process
(``time.process_time``: the matching, the store writes, the decisions of every deposit not
yet final) and the process's peak RSS. The target: at most 3 calls a poll and
100 ms of CPU a block. ``--profile DIR`` writes each block poll's cProfile to
``DIR/block<N>.prof`` (the CPU figures then include the profiler's own cost).

The counting proxy runs in a child process: forwarding a block's answers (the block of
1,000 txs, its receipts, 500 logs: megabytes) is the bench's work, not the watcher's, and
in this process it was a quarter of the CPU measured. ``--proxy-here`` runs it in this
process as the earlier rounds did (their figures include it).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import multiprocessing
import resource
import secrets
import statistics
import tempfile
import time
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench.common import Anvil
from bench.deposits_floor import Floor, decode_floor, store_floor
from bench.proxy import CountingProxy
from chains.rpc import RpcClient, Web3Transport
from guard.payment import NATIVE
from guard.settlement import Verdict
from tests.support.erc20 import Token, deploy_token
from tests.support.rigs import chain_config
from watcher.engine.chain_watcher import ChainWatcher
from watcher.store import Store
from watcher.store.deposit_records import NewSubscription

CONFIRMATIONS = 3
"""The watched chain's depth rule by default: a block makes the deposits of two blocks
before it final."""
ANVIL_FINALIZED_LAG = 64
"""How far anvil's ``finalized`` block trails its head (two epochs of 32 slots, as on
Ethereum): with ``--finality finalized``, deposits wait 64 blocks, as on mainnet."""


class _ProxyProcess:
    """A :class:`CountingProxy` in a child process, its counts asked for over a pipe."""

    def __init__(self, upstream: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipe, child = context.Pipe()
        self._process = context.Process(target=_serve_proxy, args=(upstream, child), daemon=True)
        self._process.start()
        self.url: str = self._pipe.recv()

    @property
    def calls(self) -> Counter[str]:
        """JSON-RPC calls so far, by method."""
        self._pipe.send("calls")
        calls: Counter[str] = self._pipe.recv()
        return calls

    def close(self) -> None:
        """Stop the proxy and its process."""
        self._pipe.send("close")
        self._process.join(10)


def _serve_proxy(upstream: str, pipe: Connection) -> None:
    """The child's life: serve, answer the counts until told to close."""
    proxy = CountingProxy(upstream)
    pipe.send(proxy.url)
    while pipe.recv() == "calls":
        pipe.send(Counter(proxy.calls))
    proxy.close()


def _subscribe(store: Store, watcher: ChainWatcher, token: Token, addresses: list[str]) -> float:
    """One subscription over ``addresses`` (as ``POST /v1/subscriptions`` stores it, in
    requests of 10,000); seconds it took."""
    head = store.chain(watcher.config.name)
    start = time.perf_counter()
    sub = NewSubscription(
        subscription_id="sub_" + secrets.token_hex(12),
        chain=watcher.config.name,
        owner="anonymous",
        assets=(NATIVE, token.address.lower()),
        confirmations=None,
        commit_url=None,
        reference=None,
        after_block=head.head_number if head else None,
        created_at=int(time.time() * 1000),
    )
    store.create_subscription(sub, addresses[:10_000])
    for at in range(10_000, len(addresses), 10_000):
        store.add_subscription_addresses(
            sub.subscription_id, "anonymous", addresses[at : at + 10_000], sub.after_block
        )
    return time.perf_counter() - start


def _send_block(anvil: Anvil, token: Token, targets: list[str]) -> None:
    """Half of ``targets`` paid in native value (a batch of eth_sendTransaction from the
    node's accounts), half by one transferMany; nothing mined yet."""
    half = len(targets) // 2
    senders = anvil.accounts[1:10]
    nonces = {a: int(anvil.rpc("eth_getTransactionCount", a, "pending"), 16) for a in senders}
    batch: list[Any] = []
    for i, to in enumerate(targets[:half]):
        sender = senders[i % len(senders)]
        tx = {"from": sender, "to": to, "value": hex(1 + i), "nonce": hex(nonces[sender])}
        nonces[sender] += 1
        batch.append({"jsonrpc": "2.0", "id": i, "method": "eth_sendTransaction", "params": [tx]})
    if batch:
        answers = anvil._session.post(anvil.url, json=batch, timeout=120).json()
        errors = [a for a in answers if "error" in a]
        assert not errors, errors[:1]
    rest = targets[half:]
    if rest:
        token.transfer_many(0, [(to, 1) for to in rest], wait=False)


def run(
    addresses: int,
    deposits: int,
    blocks: int,
    workdir: Path,
    profile: Path | None = None,
    proxy_here: bool = False,
    floor: bool = True,
    finality: str = "depth",
    confirmations: int = CONFIRMATIONS,
) -> None:
    anvil = Anvil("--no-mining", "--gas-limit", "1000000000", "--accounts", "10")
    try:
        anvil.rpc("evm_setAutomine", True)
        token = deploy_token(anvil)
        token.mint(anvil.accounts[0], 10**30)
        anvil.rpc("evm_setAutomine", False)
        proxy = CountingProxy(anvil.url) if proxy_here else _ProxyProcess(anvil.url)
        store = Store.open(f"sqlite:///{workdir}/deposits.db")
        config = chain_config(anvil, confirmations=confirmations, finality=finality)
        watcher = ChainWatcher(config, store, RpcClient(Web3Transport(proxy.url)))
        watcher.catch_up()
        # As the daemon does once started (watcher/app/daemon.py: run): what start-up built
        # lives as long as the process, frozen out of the collector's full passes.
        gc.collect()
        gc.freeze()
        watched = ["0x" + f"{0xDE00000000 + i:040x}" for i in range(addresses)]
        took = _subscribe(store, watcher, token, watched)
        cpu = time.process_time()
        watcher.poll()  # indexes the addresses
        print(
            f"{addresses} addresses: subscribed in {took:.2f} s, indexed in "
            f"{time.process_time() - cpu:.2f} s CPU"
        )
        spent_by_block: list[float] = []
        for b in range(blocks):
            targets = [watched[(b * deposits + i) * 7919 % addresses] for i in range(deposits)]
            _send_block(anvil, token, targets)
            anvil.rpc("anvil_mine", "0x1")
            before = Counter(proxy.calls)
            profiler = cProfile.Profile(time.process_time) if profile is not None else None
            cpu = time.process_time()
            if profiler is not None:
                profiler.enable()
            watcher.poll()
            if profiler is not None:
                profiler.disable()
                assert profile is not None
                profiler.dump_stats(str(profile / f"block{b + 1}.prof"))
            spent = time.process_time() - cpu
            spent_by_block.append(spent)
            calls = Counter(proxy.calls)
            calls.subtract(before)
            used = {k: v for k, v in calls.items() if v}
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(
                f"block {b + 1}: {sum(used.values())} calls {used}, "
                f"CPU {spent * 1000:.0f} ms, peak RSS {rss:.0f} MiB"
            )
        sub_id = store.subscriptions("anonymous")[0].subscription_id
        stored = store.deposits_of(sub_id, None, 0, 10**7)
        final = sum(1 for d in stored if d.verdict == Verdict.FINALITY_CONFIRMED)
        print(f"deposits stored: {len(stored)} ({final} final)")
        store.close()
        proxy.close()
        measured = None
        if floor and spent_by_block:
            last = int(anvil.rpc("eth_blockNumber"), 16)
            measured = Floor(
                decode_floor(anvil.url, last, token.address),
                store_floor(workdir / "deposits.db", workdir, deposits),
            )
        wait = ANVIL_FINALIZED_LAG if finality == "finalized" else confirmations - 1
        _summary(spent_by_block, wait, measured)
    finally:
        anvil.stop()


def _summary(spent: list[float], wait: int, floor: Floor | None) -> None:
    """The medians of the blocks that only bring deposits (the first ``wait``) and of those
    that also make earlier ones final, and the latter against the floor measured in this
    run."""
    seen = spent[:wait]
    finalizing = spent[wait:]
    if floor is not None:
        print(
            f"floor (this machine, this run): decode {floor.decode * 1000:.0f} ms + store "
            f"{floor.store * 1000:.0f} ms = {floor.total * 1000:.0f} ms"
        )
    if seen:
        print(f"blocks seen only: median {statistics.median(seen) * 1000:.0f} ms")
    if finalizing:
        median = statistics.median(finalizing)
        ratio = f" = {median / floor.total:.2f}x the floor" if floor is not None else ""
        print(
            f"blocks also finalizing: median {median * 1000:.0f} ms "
            f"(min {min(finalizing) * 1000:.0f}, max {max(finalizing) * 1000:.0f}){ratio}; "
            "target 100 ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--addresses", type=int, default=100_000)
    parser.add_argument("--deposits", type=int, default=1_000)
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--profile", type=Path, default=None, help="write cProfiles here")
    parser.add_argument(
        "--proxy-here",
        action="store_true",
        help="the counting proxy in this process (its CPU measured too)",
    )
    parser.add_argument(
        "--no-floor",
        action="store_true",
        help="skip the floor (an instruction count of the blocks alone: run under callgrind)",
    )
    parser.add_argument(
        "--finality",
        choices=("depth", "finalized"),
        default="depth",
        help="the chain's rule: depth (--confirmations) or anvil's finalized block (64 behind)",
    )
    parser.add_argument("--confirmations", type=int, default=CONFIRMATIONS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run(
            args.addresses,
            args.deposits,
            args.blocks,
            Path(tmp),
            args.profile,
            args.proxy_here,
            not args.no_floor,
            args.finality,
            args.confirmations,
        )


if __name__ == "__main__":
    main()
