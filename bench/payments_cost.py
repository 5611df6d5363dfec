"""What payments to an address cost in JSON-RPC calls, run by hand:
``.venv/bin/python -m bench.payments_cost [--addresses 1 10000] [--polls 10]``.

A real anvil with a real ERC-20 (tests/support/erc20.py), every call counted by a proxy in
front of it (bench/proxy.py). Per run, a fresh store with W token payments (W distinct
addresses, one token) and one native payment; then ``--polls`` rounds of: one block mined
holding a token transfer to one watched address, one watcher poll. Printed: calls per poll
(all methods, and ``eth_getLogs`` alone), and a baseline with nothing watched (the steady
state of tx watching). In the same run and over the same blocks, the **naive loop** asks one
``eth_getLogs`` per watched address per block (what a per-address webhook poller does);
its calls per poll and the ratio are printed beside ours.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import Anvil
from bench.proxy import CountingProxy
from chains.logs import TRANSFER_TOPIC, padded
from chains.rpc import RpcClient, Web3Transport
from guard.payment import NATIVE, PaymentSpec
from tests.support.erc20 import Token, deploy_token
from tests.support.rigs import chain_config
from watcher.engine.chain_watcher import ChainWatcher
from watcher.engine.payment_registration import PaymentRegistration, new_payment
from watcher.store import Store
from watcher.store.listing_store import listing


def _register(store: Store, watcher: ChainWatcher, token: Token, addresses: list[str]) -> float:
    """W token payments and one native one, in one batch (as ``POST /v1/settlements/batch``
    stores them); seconds it took."""
    config = watcher.config
    head = store.chain(config.name)
    start = time.perf_counter()
    specs = [PaymentSpec(a, token.address.lower(), 10**6) for a in addresses]
    specs.append(PaymentSpec("0x" + "ee" * 20, NATIVE, 10**18))
    now = int(time.time() * 1000)
    at = head.head_number if head else None
    rows = [new_payment(PaymentRegistration(chain=config, spec=spec), now, at) for spec in specs]
    listing(store).register_batch([new for new, _ in rows], {n.settlement_id: p for n, p in rows})
    return time.perf_counter() - start


def run(anvil: Anvil, token: Token, watched: int, polls: int, workdir: Path) -> dict[str, float]:
    """Calls per poll with ``watched`` token payments (0: none at all)."""
    proxy = CountingProxy(anvil.url)
    store = Store.open(f"sqlite:///{workdir}/pay{watched}.db")
    config = chain_config(anvil, confirmations=3)
    watcher = ChainWatcher(config, store, RpcClient(Web3Transport(proxy.url)))
    watcher.catch_up()
    addresses = ["0x" + f"{i + 1:040x}" for i in range(watched)]
    took = _register(store, watcher, token, addresses) if watched else 0.0
    watcher.poll()  # the registrations are indexed; count from here
    before, logs_before = proxy.total(), proxy.calls["eth_getLogs"]
    started = time.perf_counter()
    for i in range(polls):
        if watched:
            token.transfer(1, addresses[i % watched], 1, wait=False)
        anvil.rpc("anvil_mine", "0x1")
        watcher.poll()
    per_poll_ms = (time.perf_counter() - started) * 1000 / polls
    ours = (proxy.total() - before) / polls
    logs = (proxy.calls["eth_getLogs"] - logs_before) / polls
    naive = _naive(anvil, token, addresses, anvil.head()) if watched else 0.0
    store.close()
    proxy.close()
    return {"ours": ours, "logs": logs, "naive": naive, "ms": per_poll_ms, "register_s": took}


def _naive(anvil: Anvil, token: Token, addresses: list[str], block: int) -> float:
    """One poll of the per-address loop over one block: its calls (counted by a proxy)."""
    proxy = CountingProxy(anvil.url)
    client = RpcClient(Web3Transport(proxy.url))
    for address in addresses:
        query = {
            "fromBlock": hex(block),
            "toBlock": hex(block),
            "address": token.address,
            "topics": [TRANSFER_TOPIC, None, padded(address)],
        }
        client.call("eth_getLogs", [query])
    calls = float(proxy.total())
    proxy.close()
    return calls


def main() -> None:
    """Run the scenario for each ``--addresses`` and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--addresses", type=int, nargs="+", default=[1, 10_000])
    parser.add_argument("--polls", type=int, default=10)
    args = parser.parse_args()
    with Anvil() as anvil, tempfile.TemporaryDirectory() as tmp:
        token = deploy_token(anvil)
        token.mint(anvil.accounts[1], 10**12)
        rows = [(0, run(anvil, token, 0, args.polls, Path(tmp)))]
        rows += [(w, run(anvil, token, w, args.polls, Path(tmp))) for w in args.addresses]
    print(
        f"{'watched':>8} {'calls/poll':>10} {'getLogs/poll':>12} {'naive/poll':>10} "
        f"{'naive/ours':>10} {'ms/poll':>8} {'register s':>10}"
    )
    for watched, r in rows:
        ratio = r["naive"] / r["ours"] if r["ours"] and r["naive"] else 0.0
        print(
            f"{watched:>8} {r['ours']:>10.2f} {r['logs']:>12.2f} {r['naive']:>10.0f} "
            f"{ratio:>10.1f} {r['ms']:>8.1f} {r['register_s']:>10.1f}"
        )


if __name__ == "__main__":
    main()
