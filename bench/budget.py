"""RPC calls spent against a per-chain budget: by hand, never in CI.

``.venv/bin/python -m bench.budget [--budget 30] [--interval 0.1] [--window 10] [--windows 3]``

Three counting proxies front one real anvil; the watcher reads through the failover client
with the quorum gate (k = 2), as the daemon builds them, and polls every ``--interval``
seconds (stretched by the budget as the daemon does) while a block is mined every 0.25 s
and a new settlement is registered every second. The budget's window is shortened to
``--window`` seconds (``--budget`` calls per window) so a run takes seconds, not minutes;
the figure is the most calls the proxies received in any window, against the budget.
The baseline, in the same run, is the same load with no budget.
"""

from __future__ import annotations

import argparse
import time

from bench.common import fresh_store
from bench.proxy import CountingProxy
from chains import pool
from chains.budget import CallBudget
from tests.support.anvil import Anvil
from watcher.config.chains import ChainConfig
from watcher.engine.chain_watcher import ChainWatcher
from watcher.settlements import Registration, register


def run(
    anvil: Anvil, budget: CallBudget | None, interval: float, seconds: float
) -> tuple[list[tuple[float, int]], int, int]:
    """Run the load; returns (time, wire calls) samples, polls run and polls skipped."""
    proxies = [CountingProxy(anvil.url) for _ in range(3)]
    config = ChainConfig.model_validate(
        {
            "name": "local",
            "chain_id": 31337,
            "rpc": [p.url for p in proxies],
            "confirmations": 3,
            "quorum": 2,
        }
    )
    store = fresh_store()
    client = pool.client_for(config.rpc, chain_id=31337, budget=budget)
    gate = pool.gate_for(config.rpc, 2, client)
    watcher = ChainWatcher(config, store, client, gate=gate, budget=budget)
    period = budget.interval_s(interval) if budget is not None else interval
    samples: list[tuple[float, int]] = []
    polls = skipped = 0
    try:
        start = time.monotonic()
        next_block = next_tx = start
        while (now := time.monotonic()) - start < seconds:
            if now >= next_tx:
                tx = anvil.send()
                register(store, Registration(config, tx), time.time_ns() // 1_000_000)
                next_tx += 1.0
            if now >= next_block:
                anvil.mine(1)
                next_block += 0.25
            stats = watcher.poll()
            polls += 1
            skipped += stats.skipped is not None
            samples.append((time.monotonic() - start, sum(p.total() for p in proxies)))
            time.sleep(max(0.0, period - (time.monotonic() - now)))
    finally:
        store.close()
        for p in proxies:
            p.close()
    return samples, polls, skipped


def worst_window(samples: list[tuple[float, int]], window: float) -> int:
    """Most calls sent within any ``window`` seconds (between two samples)."""
    worst = 0
    for i, (t0, c0) in enumerate(samples):
        before = samples[i - 1][1] if i else 0
        for t1, c1 in samples[i:]:
            if t1 - t0 >= window:
                break
            worst = max(worst, c1 - before)
        del c0
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--budget", type=int, default=30, help="calls per window")
    parser.add_argument("--interval", type=float, default=0.1, help="poll interval, s")
    parser.add_argument("--window", type=float, default=10.0, help="budget window, s")
    parser.add_argument("--windows", type=int, default=3, help="run length in windows")
    args = parser.parse_args()
    seconds = args.window * args.windows
    with Anvil() as anvil:
        budget = CallBudget(args.budget, window_s=args.window)
        ours, polls, skipped = run(anvil, budget, args.interval, seconds)
        base, base_polls, _ = run(anvil, None, args.interval, seconds)
    per_min = 60.0 / args.window
    print(
        f"budget {args.budget} calls per {args.window:g} s "
        f"(= {args.budget * per_min:.0f} calls/min), poll every {args.interval:g} s "
        f"(stretched to {budget.interval_s(args.interval):g} s), {seconds:g} s run"
    )
    print(
        f"with budget: worst window {worst_window(ours, args.window)} calls "
        f"(limit {args.budget}); total {ours[-1][1]}; {polls} polls, {skipped} skipped"
    )
    print(
        f"no budget:   worst window {worst_window(base, args.window)} calls; "
        f"total {base[-1][1]}; {base_polls} polls"
    )


if __name__ == "__main__":
    main()
