"""RPC calls per block with 3 endpoints and quorum 2: by hand, never in CI.

``.venv/bin/python -m bench.quorum [--blocks 30] [--interval 1.0]``

Three counting proxies front one real anvil; the watcher reads through the failover client
and asks the quorum gate, as the daemon does (chains.pool). Settlements are
included in consecutive blocks beforehand (N = blocks + 2); then every new block brings one
settlement to depth N, so the gate is asked every block (its worst steady case). Blocks
come every ``--interval`` seconds of wall time, so the periodic chain-id and ``finalized``
cross-checks are counted at that rate.
The baseline, in the same run, is one endpoint with the trivial gate.
"""

from __future__ import annotations

import argparse
import time

from bench.common import fresh_store
from bench.proxy import CountingProxy
from chains import pool
from tests.support.anvil import Anvil
from watcher.config.chains import ChainConfig
from watcher.engine.chain_watcher import ChainWatcher
from watcher.settlements import Registration, register


def run(
    anvil: Anvil, proxies: list[CountingProxy], quorum: int, blocks: int, interval: float
) -> float:
    """Calls per block over ``blocks`` steady-state blocks."""
    config = ChainConfig.model_validate(
        {
            "name": "local",
            "chain_id": 31337,
            "rpc": [p.url for p in proxies],
            "confirmations": blocks + 2,
            "quorum": quorum,
        }
    )
    store = fresh_store()
    client = pool.client_for(config.rpc, chain_id=31337)
    gate = pool.gate_for(config.rpc, quorum, client)
    watcher = ChainWatcher(config, store, client, gate=gate)
    try:
        watcher.catch_up()
        # Settlements in consecutive blocks, all included before measuring, with N so large
        # that none is final yet: then each new block brings exactly one to depth N.
        for _ in range(blocks + 2):
            tx = anvil.send()  # automine: one block per tx
            register(store, Registration(config, tx), time.time_ns() // 1_000_000)
        watcher.catch_up()
        before = sum(p.total() for p in proxies)
        start_head = anvil.head()
        for _ in range(blocks):
            tick = time.monotonic()
            anvil.mine(1)
            watcher.catch_up()
            time.sleep(max(0.0, interval - (time.monotonic() - tick)))
        mined = anvil.head() - start_head
        return (sum(p.total() for p in proxies) - before) / mined
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args()
    with Anvil() as anvil:
        proxies = [CountingProxy(anvil.url) for _ in range(3)]
        try:
            ours = run(anvil, proxies, 2, args.blocks, args.interval)
            one = [CountingProxy(anvil.url)]
            base = run(anvil, one, 1, args.blocks, args.interval)
            one[0].close()
        finally:
            for p in proxies:
                p.close()
    print(f"calls per block, 3 endpoints, quorum 2: {ours:.2f}  (target <= 2.5)")
    print(f"baseline, 1 endpoint, no quorum:        {base:.2f}")


if __name__ == "__main__":
    main()
