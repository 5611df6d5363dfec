"""Finality latency with WebSocket heads, run by hand: ``python -m bench.latency``.

Latency = time from mining the block that makes a settlement depth-N final until the
engine has committed ``FINALITY_CONFIRMED`` to the store (the daemon's service, scheduler
and components driven in-process, against a real anvil on loopback). Measured for:

* ``heads = "poll"`` with ``poll_interval_s = 1`` — the baseline, same run;
* ``heads = "ws"`` (``eth_subscribe("newHeads")`` wakes the poller), same interval as the
  fallback.

Target: ws median <= 100 ms. The clock starts *before* the ``anvil_mine`` request, so the
figure includes mining itself and the notification's trip.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.common import Anvil, chain_config, p95, started_service
from guard.settlement import Verdict

MS = 1_000_000


def measure(anvil: Anvil, heads: str, samples: int, interval_s: float) -> tuple[list[float], str]:
    """Seconds from mining the depth-N block to the stored verdict, ``samples`` times; and a
    one-line note on the head subscription (ws only)."""
    from watcher.engine.heads import heads_report
    from watcher.settlements import Registration, register

    extra: dict[str, object] = {"poll_interval_s": interval_s, "heads": heads}
    if heads == "ws":
        extra["heads_url"] = f"ws://127.0.0.1:{anvil.port}"
    chain = chain_config(anvil.url, **extra)
    service = started_service(chain)
    latencies = []
    try:
        if heads == "ws":
            deadline = time.monotonic() + 10
            while not heads_report(service, "local").get("subscribed"):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no subscription: {heads_report(service, 'local')}")
                time.sleep(0.01)
        for i in range(samples):
            tx = anvil.send()
            anvil.receipt(tx)
            rec, _ = register(service.store, Registration(chain, tx), time.time_ns() // MS)
            anvil.mine(1)  # depth 2
            time.sleep(interval_s * (0.3 + 0.6 * (i % 5) / 5))  # land at varied poll phases
            mined = time.monotonic()
            anvil.mine(1)  # depth 3 = N
            while service.store.settlement(rec.settlement_id).verdict != Verdict.FINALITY_CONFIRMED:
                if time.monotonic() - mined > 10 * interval_s + 5:
                    raise RuntimeError("verdict never came")
                time.sleep(0.001)
            latencies.append(time.monotonic() - mined)
        report = heads_report(service, "local")
    finally:
        service.stop()
    note = ""
    if heads == "ws":
        note = (
            f"heads received {report['heads_received']}, polls woken {report['wakes']}, "
            f"fallbacks {report['fallbacks']}"
        )
    return latencies, note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=30, help="settlements per mode")
    parser.add_argument("--interval", type=float, default=1.0, help="poll_interval_s (both)")
    args = parser.parse_args()
    print(
        f"== depth-N block -> FINALITY_CONFIRMED committed, {args.samples} settlements per "
        f"mode, poll_interval_s {args.interval:g}; target ws median <= 100 ms"
    )
    results = {}
    with Anvil() as anvil:
        for heads in ("poll", "ws"):
            lat, note = measure(anvil, heads, args.samples, args.interval)
            results[heads] = lat
            print(
                f"  heads = {heads!r:6}  median {statistics.median(lat) * 1000:7.1f} ms   "
                f"p95 {p95(lat) * 1000:7.1f} ms   max {max(lat) * 1000:7.1f} ms"
                + (f"   ({note})" if note else "")
            )
    ratio = statistics.median(results["poll"]) / statistics.median(results["ws"])
    print(f"  ws is {ratio:.1f}x faster than polling at the median (baseline: same run)")


if __name__ == "__main__":
    main()
