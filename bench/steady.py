"""Calls per new block on an idle chain (the steady state), run by hand:
``.venv/bin/python -m bench.steady [--seconds 60] [--block-time 0.5] [--modes paced unpaced ws]``.

One anvil makes a block every ``--block-time`` s and nothing else happens on the chain.
Daemons' services (in process, no API) follow it, ``poll_interval_s`` = the block time, each
behind its own counting proxy (bench/proxy.py, every batch element one call), started at
random phases:

* ``paced``: ``heads = "poll"``, polls paced to the blocks (watcher/app/pacing.py);
* ``unpaced``: ``heads = "poll"``, ``poll_pacing = false`` (strictly on its interval: the
  baseline, same run, same blocks);
* ``ws``: ``heads = "ws"`` on anvil's WebSocket (newHeads wake the polls; the JSON-RPC still
  goes through the proxy).

Printed per mode: *every* JSON-RPC call per new block (by method), counted once the services
settled (after the first :data:`SETTLE_S` seconds), and pacing's own report. Target: ≤ 1.05
(one ``eth_getBlockByNumber`` per block is the physical limit).
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter

from bench.common import Anvil, chain_config, started_service
from bench.proxy import CountingProxy
from watcher.app.daemon import App

SETTLE_S = 8.0
"""The first seconds are not counted: the services start and (paced) find the phase."""


def overrides(mode: str, anvil: Anvil, block_time: float) -> dict[str, object]:
    """The chain's config keys for ``mode``."""
    if mode == "ws":
        return {
            "poll_interval_s": block_time,
            "heads": "ws",
            "heads_url": f"ws://127.0.0.1:{anvil.port}",
        }
    return {"poll_interval_s": block_time, "poll_pacing": mode == "paced"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--block-time", type=float, default=0.5)
    parser.add_argument("--modes", nargs="+", default=["paced", "unpaced", "ws"])
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(
        f"== every JSON-RPC call per new block, idle chain, a block every {args.block_time} s, "
        f"{args.seconds:g} s counted after {SETTLE_S:g} s; target <= 1.05"
    )
    with Anvil("--block-time", str(args.block_time)) as anvil:
        sides: dict[str, tuple[App, CountingProxy]] = {}
        try:
            for mode in args.modes:
                time.sleep(rng.uniform(0, args.block_time))  # each its own phase
                proxy = CountingProxy(anvil.url)
                service = started_service(
                    chain_config(proxy.url, **overrides(mode, anvil, args.block_time))
                )
                sides[mode] = (service, proxy)
            time.sleep(SETTLE_S)
            first = anvil.head()
            before = {m: Counter(p.calls) for m, (_, p) in sides.items()}
            time.sleep(args.seconds)
            last = anvil.head()
            after = {m: Counter(p.calls) for m, (_, p) in sides.items()}
            blocks = max(1, last - first)
            for mode, (service, _) in sides.items():
                spent = after[mode] - before[mode]
                total = sum(spent.values())
                methods = ", ".join(f"{k} {v / blocks:.3f}" for k, v in spent.most_common())
                report = service.pacing.report("local")
                print(
                    f"  {mode:8} {total / blocks:.3f} calls/block over {blocks} blocks ({methods})"
                    + (f"; pacing {report}" if report else "")
                )
        finally:
            for service, proxy in sides.values():
                service.stop()
                proxy.close()


if __name__ == "__main__":
    main()
