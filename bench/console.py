"""The operator console's cost in Chromium: ``.venv/bin/python -m bench.console
[--seconds 300] [--settlements 100000] [--per-minute 1000] [--page settlements]``.

A by-hand measure (not part of the suite). The daemon runs as shipped (``finality run``,
SQLite, one anvil chain making a block a second). Before the clock starts, ``--settlements``
settlements are registered through ``POST /v1/settlements/batch`` (hashes no node knows, each
with a sender and nonce of an unused address, so the daemon keeps them awaiting without
looking them up). During the run a load thread sends real transfers to anvil and registers
them with ``confirmations = 1`` at ``--per-minute`` a minute; each becomes a
``settlement_confirmed`` event a block later, so the stream the page follows carries about
that many events a minute (the figure printed is counted from ``/v1/events/latest``).

Debian's chromium (the one the tests use, launched the same way) shows ``/ui/#/PAGE``; every
10 s the script samples the CPU time and proportional memory (PSS) of every chromium process it started
(/proc) and the page's own figures (Chrome DevTools Protocol ``Performance.getMetrics``: JS
heap, listeners; the elements in its document), and counts the page's requests. Printed: CPU as % of one core,
memory and JS heap at start, end and peak, elements at the end, requests a minute.
"""

from __future__ import annotations

import argparse
import os
import secrets
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.anvil import Anvil
from tests.support.browser import ARGS, CHROMIUM
from tests.support.daemon import CHAIN, Daemon

TICK_S = 10.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def seed(daemon: Daemon, count: int) -> float:
    """Register ``count`` settlements nobody will ever mine; seconds it took."""
    sender = "0x" + secrets.token_hex(20)
    started = time.monotonic()
    for first in range(0, count, 1000):
        items = [
            {
                "chain": CHAIN,
                "tx_hash": "0x" + secrets.token_hex(32),
                "sender": sender,
                "nonce": 1_000_000 + i,
            }
            for i in range(first, min(count, first + 1000))
        ]
        answer = daemon.post("/v1/settlements/batch", {"items": items}, timeout=120)
        answer.raise_for_status()
        refused = [r for r in answer.json()["results"] if r["status"] not in (200, 201)]
        if refused:
            raise RuntimeError(f"seeding refused: {refused[0]}")
    return time.monotonic() - started


class Load(threading.Thread):
    """Real transfers registered at ``per_minute``: a confirmed event each, a block later."""

    def __init__(self, daemon: Daemon, anvil: Anvil, per_minute: int) -> None:
        super().__init__(daemon=True)
        self.daemon_url = daemon.url
        self.anvil = anvil
        self.per_second = per_minute / 60.0
        self.stop = threading.Event()
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with httpx.Client(base_url=self.daemon_url, timeout=30) as api:
                started = time.monotonic()
                while not self.stop.wait(0.25):
                    due = int((time.monotonic() - started) * self.per_second) - self.sent
                    if due <= 0:
                        continue
                    txs = [self.anvil.send(sender=i % 8, to=9) for i in range(due)]
                    items = [{"chain": CHAIN, "tx_hash": tx, "confirmations": 1} for tx in txs]
                    api.post("/v1/settlements/batch", json={"items": items}).raise_for_status()
                    self.sent += due
        except BaseException as exc:  # reported at the end
            self.error = exc


def chromium_pids(root: int) -> list[int]:
    """Every chromium process below ``root`` (the browser, its renderers and helpers)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            todo.append(child)
            try:
                exe = (Path("/proc") / str(child) / "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if b"chromium" in exe:
                found.append(child)
    return found


def usage(pids: list[int]) -> tuple[float, int]:
    """(CPU seconds so far, proportional set size in bytes) summed over ``pids``: PSS
    counts a page shared by several chromium processes once in all, where RSS would count
    it in each."""
    cpu, pss = 0.0, 0
    for pid in pids:
        proc = Path("/proc") / str(pid)
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            rollup = (proc / "smaps_rollup").read_text().splitlines()
        except OSError:
            continue
        cpu += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        pss += sum(int(line.split()[1]) * 1024 for line in rollup if line.startswith("Pss:"))
    return cpu, pss


def run(seconds: float, settlements: int, per_minute: int, page_name: str) -> None:
    from playwright.sync_api import sync_playwright

    with Anvil("--block-time", "1") as anvil, tempfile.TemporaryDirectory() as tmp:
        daemon = Daemon(Path(tmp) / "d", anvil.url)
        try:
            took = seed(daemon, settlements)
            print(f"seeded {settlements} settlements in {took:.0f} s")
            load = Load(daemon, anvil, per_minute)
            load.start()
            with sync_playwright() as driver:
                context = driver.chromium.launch_persistent_context(
                    str(Path(tmp) / "profile"),
                    executable_path=CHROMIUM,
                    args=ARGS,
                    headless=True,
                    viewport={"width": 1280, "height": 900},
                )
                page = context.new_page()
                requests: list[str] = []
                page.on("request", lambda r: requests.append(r.url))
                page.goto(f"{daemon.url}/ui/#/{page_name}")
                page.locator("#stream-state[data-state=live]").wait_for(timeout=60_000)
                cdp = context.new_cdp_session(page)
                cdp.send("Performance.enable")
                pids = chromium_pids(os.getpid())
                first_event = latest(daemon)
                samples = [sample(pids, cdp, page)]
                started = time.monotonic()
                while time.monotonic() - started < seconds:
                    time.sleep(TICK_S)
                    samples.append(sample(pids, cdp, page))
                elapsed = time.monotonic() - started
                events = latest(daemon) - first_event
                state = page.locator("#stream-state").text_content()
                context.close()
            load.stop.set()
            load.join(timeout=30)
            if load.error is not None:
                raise load.error
            report(samples, elapsed, events, len(requests), state or "")
        finally:
            daemon.close()


def latest(daemon: Daemon) -> int:
    return int(daemon.get("/v1/events/latest").json()["last_event_id"])


def sample(pids: list[int], cdp: Any, page: Any) -> dict[str, float]:
    cpu, rss = usage(pids)
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return {
        "t": time.monotonic(),
        "cpu": cpu,
        "rss": rss,
        "heap": metrics.get("JSHeapUsedSize", 0.0),
        "nodes": float(page.evaluate("document.getElementsByTagName('*').length")),
        "listeners": metrics.get("JSEventListeners", 0.0),
    }


def report(
    samples: list[dict[str, float]], elapsed: float, events: int, requests: int, state: str
) -> None:
    first, last = samples[0], samples[-1]
    cpu = 100 * (last["cpu"] - first["cpu"]) / (last["t"] - first["t"])
    mib = 1024 * 1024
    print(f"run: {elapsed:.0f} s, {events} events on the stream ({60 * events / elapsed:.0f}/min)")
    print(f"chromium CPU (all its processes): {cpu:.1f}% of one core on average")
    peak = max(s["rss"] for s in samples)
    print(
        f"chromium memory (PSS): {first['rss'] / mib:.0f} MiB at start, {last['rss'] / mib:.0f} at end, "
        f"{peak / mib:.0f} peak"
    )
    heap = max(s["heap"] for s in samples)
    print(
        f"page JS heap: {first['heap'] / mib:.1f} MiB at start, {last['heap'] / mib:.1f} at end, "
        f"{heap / mib:.1f} peak; elements in the page {last['nodes']:.0f}, listeners {last['listeners']:.0f}"
    )
    print(f"page requests: {requests} ({60 * requests / elapsed:.0f}/min); status: {state}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--settlements", type=int, default=100_000)
    parser.add_argument("--per-minute", type=int, default=1000)
    parser.add_argument("--page", default="settlements")
    args = parser.parse_args()
    run(args.seconds, args.settlements, args.per_minute, args.page)


if __name__ == "__main__":
    main()
