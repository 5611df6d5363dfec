"""The peers :mod:`bench.receipts_cost` measures the daemon against, in the same run, on the
same anvil, each behind its own counting proxy and watching its own W txs (registered as the
daemon's are: half before they are sent, half once mined). Each gives a bare verdict, no
receipt:

* **naive loop**: every ``block_time`` one batch of ``eth_blockNumber`` and one
  ``eth_getTransactionReceipt`` per tx not yet N deep;
* **web3-ethereum-defi's reorg monitor** (bench/peer_defi.py, a process in a virtualenv of
  its own: its web3 pin is not ours), when ``--defi-python`` names that interpreter.

Latency = the tx's depth-N block seen by the bench's :class:`BlockClock` (or its
registration, if later) → the peer's verdict.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import httpx

from bench.common import Anvil
from bench.proxy import CountingProxy
from bench.receipts_scenario import BlockClock, Run, send_spread, signed_txs

PEER_DEFI = Path(__file__).with_name("peer_defi.py")


class Peer(Protocol):
    """A watcher under test: told which txs to watch, says when each is final."""

    done: dict[str, float]
    """tx hash -> ``time.monotonic()`` of its verdict."""

    def watch(self, tx_hash: str) -> None: ...

    def stop(self) -> None: ...


class NaiveLoop:
    """The naive loop (module doc) in a thread of the bench."""

    def __init__(self, url: str, n: int, block_time: float) -> None:
        self.url, self.n, self.block_time = url, n, block_time
        self.done: dict[str, float] = {}
        self._watched: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._rpc = httpx.Client(timeout=30.0)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def watch(self, tx_hash: str) -> None:
        with self._lock:
            self._watched.add(tx_hash)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                todo = sorted(self._watched - set(self.done))
            calls: list[dict[str, object]] = [
                {"jsonrpc": "2.0", "id": 0, "method": "eth_blockNumber", "params": []}
            ]
            calls += [
                {
                    "jsonrpc": "2.0",
                    "id": i + 1,
                    "method": "eth_getTransactionReceipt",
                    "params": [h],
                }
                for i, h in enumerate(todo)
            ]
            answer = self._rpc.post(self.url, json=calls).json()
            answers = {a["id"]: a.get("result") for a in answer}
            head = int(str(answers[0]), 16)
            for i, h in enumerate(todo):
                receipt = answers.get(i + 1)
                if (
                    isinstance(receipt, dict)
                    and head - int(receipt["blockNumber"], 16) + 1 >= self.n
                ):
                    self.done[h] = time.monotonic()
            time.sleep(self.block_time)


class DefiMonitor:
    """web3-ethereum-defi's reorg monitor (bench/peer_defi.py) in its own interpreter."""

    def __init__(self, python: str, url: str, n: int, block_time: float) -> None:
        self.done: dict[str, float] = {}
        self._process = subprocess.Popen(
            [python, str(PEER_DEFI), url, str(n), str(block_time)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        assert self._process.stdout is not None
        first = self._process.stdout.readline().strip()
        if first != "ready":
            self._process.kill()
            raise RuntimeError(f"bench/peer_defi.py did not start: {first!r}")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "final":
                self.done[parts[1]] = float(parts[2])

    def watch(self, tx_hash: str) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(f"watch {tx_hash}\n")
        self._process.stdin.flush()

    def stop(self) -> None:
        self._process.terminate()
        self._process.wait(timeout=10)


def run(anvil: Anvil, w: int, n: int, make: Callable[[str], Peer]) -> Run:
    """One peer, ``make(proxy url)``, over its own W txs, registered as the daemon's are
    (the module doc)."""
    clock = BlockClock(anvil)
    proxy = CountingProxy(anvil.url)
    txs = signed_txs(anvil, w)
    peer = make(proxy.url)  # its start-up calls count, not the blocks it takes to start
    first_block = clock.head()
    registered_at: dict[str, float] = {}
    before, after = txs[0::2], txs[1::2]
    for tx_hash, _ in before:
        registered_at[tx_hash] = time.monotonic()
        peer.watch(tx_hash)
    mined = send_spread(anvil, clock, txs)
    for tx_hash, _ in after:
        registered_at[tx_hash] = time.monotonic()
        peer.watch(tx_hash)
    latencies = []
    deadline = time.monotonic() + 120
    for tx_hash, _ in txs:
        since = max(clock.wait_for(mined[tx_hash] + n - 1), registered_at[tx_hash])
        while tx_hash not in peer.done:  # lower-case hex, as keccak256().hex() spells it
            if time.monotonic() > deadline:
                raise TimeoutError(f"{type(peer).__name__}: {tx_hash} never final")
            time.sleep(0.005)
        latencies.append(max(0.0, peer.done[tx_hash] - since))
    peer.stop()
    result = Run(proxy.total(), clock.head() - first_block, latencies, dict(proxy.calls))
    proxy.close()
    clock.stop()
    return result
