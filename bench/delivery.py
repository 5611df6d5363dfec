"""Benchmarks of the delivery outbox, run by hand: ``python -m bench.delivery``.

Every figure is printed beside a baseline measured in the same run:

* throughput: deliveries per second from the outbox on SQLite (claim with a lease, POST
  signed, mark delivered: the real :class:`~watcher.delivery.Sender`, default 4 workers) to
  a loopback receiver in its own process that verifies signatures and dedupes keys, against
  the same number of identical POSTs sent straight from memory by as many threads (the
  loopback HTTP ceiling, no store). Target: >= 500/s sustained (per-second minimum shown).
* memory: a child process drains a 100,000-entry backlog; its RSS is sampled while it
  drains, against another child draining 1,000 entries. No growth means the peak with
  100,000 is close to the peak with 1,000, and RSS is flat from 10 % to 90 % drained.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import httpx

from tests.support.anvil import ROOT, free_port
from watcher.config.sections import DeliveryConfig
from watcher.delivery.format import body_bytes, headers
from watcher.delivery.sender import Sender
from watcher.destinations import AllowList
from watcher.store import Store
from watcher.store.outbox_store import DeliveryRecord, NewDelivery

LOCAL = AllowList(loopback=True)
"""The receivers here listen on loopback (a dev-chain daemon allows that by default)."""

SECRET = "bench-secret"
WORKERS = DeliveryConfig().workers


def rss_mb() -> float:
    """Current resident set size of this process (MB)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def alert_body(i: int) -> dict[str, Any]:
    """A realistic alert body (~400 bytes)."""
    return {
        "type": "alert",
        "version": 1,
        "id": i,
        "chain": "local",
        "kind": "reorg",
        "severity": "warning",
        "settlement_id": None,
        "created_at": 1_700_000_000_000 + i,
        "payload": {
            "depth": 2,
            "common_ancestor": {"number": 1000 + i, "hash": "0x" + f"{i:064x}"},
            "replaced": [{"number": 1001 + i, "old_hash": "0x" + "aa" * 32}],
            "touched": [],
        },
    }


def fill(store_url: str, url: str, count: int) -> None:
    """Enqueue ``count`` pending webhook deliveries to ``url``."""
    store = Store.open(store_url)
    outbox = store.outbox()
    now = time.time_ns() // 1_000_000
    for start in range(0, count, 5000):
        outbox.enqueue_many(
            [
                NewDelivery("webhook", "reorg", url, f"bench:{i}", None, i, alert_body(i))
                for i in range(start, min(count, start + 5000))
            ],
            now,
        )
    store.close()


def fresh_db() -> str:
    return f"sqlite:///{tempfile.mkdtemp(prefix='fw-bench-')}/delivery.db"


class ReceiverProcess:
    """``python -m tests.support.receiver`` on a free port, in its own process."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.receiver",
                "--port",
                str(self.port),
                "--secret",
                SECRET,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("receiver did not start")

    def stats(self) -> dict[str, int]:
        return dict(httpx.get(f"http://127.0.0.1:{self.port}/stats", timeout=5).json())

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


def config() -> DeliveryConfig:
    return DeliveryConfig(secret=SECRET, receipt_wait_s=0.0)


def drain(store: Store, sample: float = 1.0) -> tuple[float, list[int], list[tuple[int, float]]]:
    """Run a sender until the backlog is empty: (seconds, delivered per second window,
    (backlog, RSS MB) samples)."""
    outbox = store.outbox()
    total, _ = outbox.backlog()
    sender = Sender(store, config(), destinations=LOCAL)
    windows: list[int] = []
    rss: list[tuple[int, float]] = []
    started = time.monotonic()
    sender.start()
    try:
        last_left, last_at = total, started
        while True:
            time.sleep(sample)
            left, _ = outbox.backlog()
            now = time.monotonic()
            windows.append(round((last_left - left) / (now - last_at)))
            rss.append((left, rss_mb()))
            last_left, last_at = left, now
            if left == 0:
                break
    finally:
        elapsed = time.monotonic() - started
        sender.stop()
    return elapsed, windows, rss


def direct(url: str, count: int) -> float:
    """Seconds to POST ``count`` signed bodies with ``WORKERS`` threads, no store."""
    bodies = [body_bytes(alert_body(i)) for i in range(count)]
    per = (count + WORKERS - 1) // WORKERS

    def run(part: list[bytes], offset: int) -> None:
        with httpx.Client(timeout=10) as client:
            for j, data in enumerate(part):
                rec = DeliveryRecord(
                    offset + j,
                    None,
                    None,
                    "webhook",
                    "reorg",
                    url,
                    f"direct:{offset + j}",
                    "sending",
                    1,
                    0,
                    None,
                    None,
                    None,
                    0,
                    0,
                    None,
                )
                client.post(url, content=data, headers=headers(rec, data, SECRET, int(time.time())))

    threads = [
        threading.Thread(target=run, args=(bodies[i * per : (i + 1) * per], i * per))
        for i in range(WORKERS)
    ]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - started


def throughput(count: int) -> None:
    receiver = ReceiverProcess()
    try:
        url = fresh_db()
        fill(url, receiver.url, count)
        store = Store.open(url)
        elapsed, windows, _ = drain(store)
        store.close()
        stats = receiver.stats()
        base = direct(receiver.url, count)
    finally:
        receiver.close()
    steady = windows[1:-1] or windows
    print(f"== throughput, {count} deliveries, SQLite outbox, {WORKERS} workers, target >= 500/s")
    print(
        f"  outbox:   {count / elapsed:7.0f}/s overall, per-second min {min(steady)} "
        f"median {statistics.median(steady):.0f}  (receiver: {stats['requests']} requests, "
        f"{stats['applied']} applied)"
    )
    print(f"  baseline: {count / base:7.0f}/s  same POSTs straight from memory, no store")
    print(f"  ratio outbox/baseline: {base / elapsed:.2f}")


def rss_child(store_url: str) -> None:
    """In a child: drain the store's backlog, print JSON with RSS figures."""
    store = Store.open(store_url)
    total, _ = store.outbox().backlog()
    before = rss_mb()
    elapsed, _, samples = drain(store, sample=0.5)
    store.close()
    print(json.dumps({"count": total, "before": before, "samples": samples, "seconds": elapsed}))


def rss_at(samples: list[list[float]], count: int, fraction: float) -> float:
    """RSS of the sample taken nearest to ``fraction`` of ``count`` drained."""
    target = count * (1 - fraction)
    return min(samples, key=lambda s: abs(s[0] - target))[1]


def memory(big: int, small: int) -> None:
    receiver = ReceiverProcess()
    try:
        results = {}
        for count in (small, big):
            url = fresh_db()
            fill(url, receiver.url, count)
            out = subprocess.run(
                [sys.executable, "-m", "bench.delivery", "--rss-child", url],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            results[count] = json.loads(out.strip().splitlines()[-1])
    finally:
        receiver.close()
    print("== memory while draining a backlog (RSS of the sending process), target: no growth")
    for count, r in results.items():
        rss = [s[1] for s in r["samples"]]
        line = (
            f"  {count:>7} entries: before {r['before']:6.1f} MB  peak {max(rss):6.1f} MB  "
            f"({r['seconds']:.1f} s)"
        )
        if count == big:
            marks = [rss_at(r["samples"], count, f) for f in (0.1, 0.5, 0.9)]
            line += "  at 10/50/90 % drained: " + " / ".join(f"{m:.1f}" for m in marks) + " MB"
        print(line)
    peak_big = max(s[1] for s in results[big]["samples"])
    peak_small = max(s[1] for s in results[small]["samples"])
    print(f"  growth, {big} vs {small} (baseline): {peak_big - peak_small:+.1f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller counts, for a smoke run")
    parser.add_argument(
        "--only", nargs="+", choices=["throughput", "memory"], default=["throughput", "memory"]
    )
    parser.add_argument("--rss-child", metavar="DB", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.rss_child)
        return
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    if "throughput" in args.only:
        throughput(3_000 if args.quick else 20_000)
    if "memory" in args.only:
        memory(10_000 if args.quick else 100_000, 1_000)


if __name__ == "__main__":
    main()
