"""web3-ethereum-defi's reorg monitor as a peer of :mod:`bench.receipts_cost`: a process in
a virtualenv of its own, never a dependency of the project (its pins are not ours):

    python3 -m venv /tmp/defi-venv && /tmp/defi-venv/bin/pip install web3-ethereum-defi
    .venv/bin/python -m bench.receipts_cost --defi-python /tmp/defi-venv/bin/python

Run as ``PYTHON bench/peer_defi.py RPC_URL N POLL_S`` (stdlib, web3 and eth_defi only: no
module of this project is imported). The loop is the library's documented one
(``ReorganisationMonitor`` docstring): every ``POLL_S`` seconds ``update_chain()``
(``eth_blockNumber`` and the last ``check_depth`` = N headers again, to see a reorg), then
each block of the read range it returns read once for its tx hashes
(``eth_getBlockByNumber(number, false)``); a reorg drops what was read from the purged
blocks. A watched tx is final when its block is N deep and the monitor still holds that
block's hash at its height: a verdict, no receipt.

Protocol: it prints ``ready`` once its initial headers are loaded; it reads ``watch HASH``
lines on stdin and prints ``final HASH T`` (T: ``time.monotonic()``, the clock every process
of the machine shares) when a watched tx is final.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from typing import Any


def main() -> None:
    url, n, poll_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    web3_mod: Any = importlib.import_module("web3")
    monitors: Any = importlib.import_module("eth_defi.event_reader.reorganisation_monitor")
    web3 = web3_mod.Web3(web3_mod.HTTPProvider(url, request_kwargs={"timeout": 30}))
    monitor = monitors.JSONRPCReorganisationMonitor(web3, check_depth=n)
    monitor.load_initial_block_headers(block_count=n)
    watched: set[str] = set()
    lock = threading.Lock()

    def read_stdin() -> None:
        for line in sys.stdin:
            parts = line.split()
            if len(parts) == 2 and parts[0] == "watch":
                with lock:
                    watched.add(parts[1].lower())

    threading.Thread(target=read_stdin, daemon=True).start()
    print("ready", flush=True)
    included: dict[str, tuple[int, str]] = {}
    """tx hash -> (block number, block hash) as read."""
    final: set[str] = set()
    while True:
        resolution = monitor.update_chain()
        start, end = resolution.get_read_range()
        if resolution.reorg_detected:
            included = {tx: at for tx, at in included.items() if at[0] < start}
        for number in range(start, end + 1):
            block = web3.provider.make_request("eth_getBlockByNumber", [hex(number), False])
            result = block.get("result") or {}
            for tx_hash in result.get("transactions") or []:
                included[str(tx_hash).lower()] = (number, str(result["hash"]))
        head = monitor.get_last_block_read()
        with lock:
            todo = watched - final
        now = time.monotonic()
        for tx_hash in sorted(todo):
            at = included.get(tx_hash)
            if at is None or head - at[0] + 1 < n:
                continue
            held = monitor.get_block_by_number(at[0])
            if held is not None and held.block_hash == at[1]:
                final.add(tx_hash)
                print(f"final {tx_hash} {now}", flush=True)
        time.sleep(poll_s)


if __name__ == "__main__":
    main()
