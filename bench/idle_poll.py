"""What a poll costs when nothing happened, run by hand:
``.venv/bin/python -m bench.idle_poll [--polls 500] [--rounds 5]``.

A chain with no new block is still polled every interval (or at every head), and a daemon
follows many such chains: what an idle poll costs in CPU is paid all day. A real anvil, the
daemon's service as built (one chain, a fresh SQLite store, nothing registered), its poll job
run ``--polls`` times in this process with no block mined (``ChainRunner.poll``: the engine's
poll, deadlines, look-ups, the after-poll hooks). The baseline, measured in the same run: the
one JSON-RPC call the poll cannot avoid (``eth_getBlockByNumber("latest")`` through the same
client), ``--polls`` times. Printed: CPU per poll and per bare call (the best of ``--rounds``
rounds, the least disturbed by other processes), and their ratio.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from bench.common import Anvil, chain_config, fresh_store
from watcher.app.build import build
from watcher.config.model import Config


def cpu_ms_per_call(action: Callable[[], object], count: int, rounds: int) -> float:
    """The best of ``rounds`` rounds of ``count`` calls: process CPU per call, in ms."""
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(count):
            action()
        best = min(best, (time.process_time() - started) / count * 1000)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    anvil = Anvil()
    store = fresh_store()
    try:
        config = Config(store={"url": store.url}, chains=[chain_config(anvil.url)])  # type: ignore[arg-type]
        store.close()
        service = build(config)
        service.start_chain("local")
        client = service.clients["local"]
        for _ in range(20):  # warm: connections, statement caches
            service.chains.poll("local")
        poll = cpu_ms_per_call(lambda: service.chains.poll("local"), args.polls, args.rounds)
        bare = cpu_ms_per_call(lambda: client.block("latest"), args.polls, args.rounds)
        service.store.close()
    finally:
        anvil.stop()
    print(f"idle poll: {poll:.2f} ms CPU; the bare eth_getBlockByNumber: {bare:.2f} ms CPU")
    print(f"ratio: {poll / bare:.2f}x the one call a poll cannot avoid")


if __name__ == "__main__":
    main()
