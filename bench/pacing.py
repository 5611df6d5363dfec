"""Polls paced to the blocks (watcher/app/pacing.py), run by hand:
``.venv/bin/python -m bench.pacing [--rounds 4] [--blocks 40] [--block-time 0.5]``.

One anvil makes a block every ``--block-time`` s; two daemons' services (in process, no API)
follow it with ``poll_interval_s`` = the block time and N = 3, each behind its own counting
proxy (bench/proxy.py): one paced (the default), one with ``poll_pacing = false`` (strictly
on its interval: the baseline, same run, same node, same blocks). Every block a tx is sent
and registered in both. Latency = the tx's depth-N block seen (a separate watcher polling
anvil every 10 ms) → ``FINALITY_CONFIRMED`` in the service's store. Each round starts both
services at a new random phase of the block time, since an unpaced daemon keeps the phase
it started with for the whole round: one round alone says only how lucky it was.

Printed per round and over all rounds: latency median / p95 / max of each, the ratio, and
the calls per block each made (the price of pacing: the retries of its probes).
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
from dataclasses import dataclass

from bench.common import Anvil, chain_config, p95, started_service
from bench.proxy import CountingProxy
from bench.receipts_scenario import BlockClock
from guard.settlement import Verdict
from watcher.app.daemon import App

N = 3
"""The depth bench.common's chain asks for."""
SETTLE_S = 8.0
"""Blocks of a round's first seconds are not counted: both services start and catch up."""


class Verdicts:
    """When each watched settlement of a service was first seen FINALITY_CONFIRMED."""

    def __init__(self, service: App) -> None:
        self.service = service
        self.pending: set[str] = set()
        self.final: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def watch(self, sid: str) -> None:
        with self._lock:
            self.pending.add(sid)

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                todo = sorted(self.pending)
            for sid in todo:
                if self.service.store.settlement(sid).verdict == Verdict.FINALITY_CONFIRMED:
                    now = time.monotonic()
                    with self._lock:
                        self.pending.discard(sid)
                        self.final[sid] = now
            time.sleep(0.002)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Side:
    """One service's figures of a round."""

    latencies: list[float]
    calls_per_block: float
    heads_per_block: float
    """``eth_getBlockByNumber`` calls per block: the polls (and their retries)."""
    steady_heads_per_block: float
    """The same once both services settled (after :data:`SETTLE_S`): the steady state."""
    missing: int


def one_round(
    anvil: Anvil, blocks: int, block_time: float, rng: random.Random
) -> tuple[dict[str, Side], dict[str, object] | None]:
    """Both services over ``blocks`` blocks; the latencies and calls per block of each."""
    from watcher.settlements import Registration, register

    clock = BlockClock(anvil)
    time.sleep(rng.uniform(0, block_time))  # a new phase for both
    sides: dict[str, tuple[App, CountingProxy, Verdicts]] = {}
    for name, pacing in (("paced", True), ("unpaced", False)):
        proxy = CountingProxy(anvil.url)
        chain = chain_config(proxy.url, poll_interval_s=block_time, poll_pacing=pacing)
        service = started_service(chain)
        sides[name] = (service, proxy, Verdicts(service))
        time.sleep(rng.uniform(0, block_time))  # and each its own
    start_block = clock.head()
    started = time.monotonic()
    watched: list[tuple[dict[str, str], int]] = []
    steady: dict[str, int] = {}
    steady_block = 0
    try:
        for _ in range(blocks):
            number = clock.head()
            if not steady and time.monotonic() - started > SETTLE_S:
                steady_block = number
                steady = {
                    n: proxy.calls["eth_getBlockByNumber"] for n, (_, proxy, _) in sides.items()
                }
            tx = anvil.send()
            mined = anvil.receipt(tx)
            block = int(mined["blockNumber"], 16)
            ids = {}
            for name, (service, _, verdicts) in sides.items():
                chain = service.chain_config("local")
                rec, _ = register(service.store, Registration(chain, tx), time.time_ns() // 10**6)
                verdicts.watch(rec.settlement_id)
                ids[name] = rec.settlement_id
            if time.monotonic() - started > SETTLE_S:
                watched.append((ids, block))
            clock.wait_for(number + 1)
        last = max(block for _, block in watched) + N - 1
        clock.wait_for(last)
        deadline = time.monotonic() + 10 * block_time + 5
        while any(v.pending for _, _, v in sides.values()) and time.monotonic() < deadline:
            time.sleep(0.01)
        out: dict[str, Side] = {}
        span = max(1, clock.head() - start_block)
        for name, (_, proxy, verdicts) in sides.items():
            lat = [
                verdicts.final[ids[name]] - clock.wait_for(block + N - 1)
                for ids, block in watched
                if ids[name] in verdicts.final
            ]
            heads = proxy.calls["eth_getBlockByNumber"] / span
            settled = (proxy.calls["eth_getBlockByNumber"] - steady.get(name, 0)) / max(
                1, clock.head() - steady_block
            )
            out[name] = Side(lat, proxy.total() / span, heads, settled, len(watched) - len(lat))
        return out, sides["paced"][0].pacing.report("local")
    finally:
        for service, proxy, verdicts in sides.values():
            verdicts.stop()
            service.stop()
            proxy.close()
        clock.stop()


def _line(label: str, lat: list[float]) -> str:
    return (
        f"{label:8} median {statistics.median(lat) * 1000:6.0f} ms, p95 {p95(lat) * 1000:6.0f} ms,"
        f" max {max(lat) * 1000:6.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--block-time", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    every: dict[str, list[float]] = {"paced": [], "unpaced": []}
    calls: dict[str, list[float]] = {"paced": [], "unpaced": []}
    heads: dict[str, list[float]] = {"paced": [], "unpaced": []}
    steady: dict[str, list[float]] = {"paced": [], "unpaced": []}
    print(
        f"== depth-N block -> FINALITY_CONFIRMED stored, a block every {args.block_time} s, "
        f"N = {N}, poll_interval_s = the block time, {args.rounds} rounds of {args.blocks} blocks"
    )
    with Anvil("--block-time", str(args.block_time)) as anvil:
        for r in range(args.rounds):
            out, report = one_round(anvil, args.blocks, args.block_time, rng)
            print(f"-- round {r + 1}: pacing {report}")
            for name, side in out.items():
                every[name] += side.latencies
                calls[name].append(side.calls_per_block)
                heads[name].append(side.heads_per_block)
                steady[name].append(side.steady_heads_per_block)
                note = f" ({side.missing} without a verdict in time)" if side.missing else ""
                print(
                    f"   {_line(name, side.latencies)}, {side.calls_per_block:.2f} calls/block"
                    f" ({side.heads_per_block:.2f} eth_getBlockByNumber, "
                    f"{side.steady_heads_per_block:.3f} once settled){note}"
                )
    paced, unpaced = every["paced"], every["unpaced"]
    print("-- all rounds")
    for name in ("paced", "unpaced"):
        print(
            f"   {_line(name, every[name])}, {statistics.mean(calls[name]):.2f} calls/block"
            f" ({statistics.mean(heads[name]):.2f} eth_getBlockByNumber,"
            f" {statistics.mean(steady[name]):.3f} once settled)"
        )
    print(
        f"   paced / unpaced: median {statistics.median(paced) / statistics.median(unpaced):.2f}x,"
        f" p95 {p95(paced) / p95(unpaced):.2f}x, max {max(paced) / max(unpaced):.2f}x;"
        f" calls {statistics.mean(calls['paced']) / statistics.mean(calls['unpaced']):.2f}x,"
        f" eth_getBlockByNumber {statistics.mean(heads['paced']) / statistics.mean(heads['unpaced']):.2f}x"
    )


if __name__ == "__main__":
    main()
