"""The poll's look-up of a registered tx, its CPU on the poll thread, in process, run by hand:
``.venv/bin/python -m bench.lookup_cost [--w 500] [--runs 3]``.

What the poll thread spends because of one ``POST /v1/settlements`` (``bench.api_cost`` gives
the API's part): after a registration, the chain's next poll looks the tx up by hash
(``eth_getTransactionByHash``, watcher/engine/lookups.py) and records what the node said. A
real anvil, a watcher driven by hand over a fresh SQLite store, the two cases of
``bench.receipts_cost``: ``--w`` txs registered while still unsent (the node knows none of
them: each is asked, and its next probe scheduled) and ``--w`` registered after they were
mined (each is asked, its block's receipts fetched and checked, its inclusion recorded and
decided). Printed: CPU µs per tx (the poll thread's ``time.thread_time``, a poll that finds
no new block, less an idle poll's), the median of ``--runs``.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import tempfile
import time

from tests.integration.receipts_helpers import TxFactory
from tests.support.anvil import Anvil
from tests.support.rigs import Rig, make_watcher

ACCOUNTS = 3


def poll_cpu(rig: Rig) -> float:
    """The CPU seconds of one poll on this thread (the poll thread, in process)."""
    started = time.thread_time()
    rig.watcher.poll()
    return time.thread_time() - started


def cpu_per_lookup(anvil: Anvil, w: int) -> tuple[float, float]:
    """(µs a tx registered unsent, µs a tx registered once mined) of the look-ups."""
    with tempfile.TemporaryDirectory(prefix="fw-lookup-cost-") as tmp:
        rig = make_watcher(anvil, f"sqlite:///{tmp}/l.db", confirmations=12)
        try:
            rig.watcher.poll()
            idle = min(poll_cpu(rig) for _ in range(5))
            for _ in range(w):  # registered before the txs are sent: the node knows none
                rig.register("0x" + secrets.token_hex(32))
            unsent = (poll_cpu(rig) - idle) / w
            rig.clock.advance(seconds=3600)  # their next probes out of the way: mined later
            factories = [TxFactory(anvil, account) for account in range(ACCOUNTS)]
            anvil.rpc("evm_setAutomine", False)
            try:
                sent = [
                    factories[i % ACCOUNTS].send(factories[i % ACCOUNTS].dynamic())
                    for i in range(w)
                ]
                anvil.mine(1)
            finally:
                anvil.rpc("evm_setAutomine", True)
            rig.watcher.poll()  # the block is scanned: none of these is watched yet
            for tx_hash in sent:  # registered after they were mined
                rig.register(tx_hash)
            mined = (poll_cpu(rig) - idle) / w
            return unsent * 1e6, mined * 1e6
        finally:
            rig.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--w", type=int, default=500, help="txs of each case")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with Anvil() as anvil:
        figures = [cpu_per_lookup(anvil, args.w) for _ in range(args.runs)]
    unsent = statistics.median(u for u, _ in figures)
    mined = statistics.median(m for _, m in figures)
    print(f"look-up CPU a tx (poll thread), {args.w} of each, {args.runs} runs:")
    print(f"  registered unsent: {unsent:,.0f} us  ({', '.join(f'{u:,.0f}' for u, _ in figures)})")
    print(f"  registered mined:  {mined:,.0f} us  ({', '.join(f'{m:,.0f}' for _, m in figures)})")


if __name__ == "__main__":
    main()
