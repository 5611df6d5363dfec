"""The scenario :mod:`bench.receipts_cost` runs for the daemon and for each peer
(bench/peers.py): when each block was seen, W signed transfers sent over
:data:`SPREAD_BLOCKS` blocks, and one side's figures."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

from bench.common import Anvil
from guard.hashing import keccak256
from tests.integration.receipts_helpers import TxFactory

SPREAD_BLOCKS = 10
"""The W txs are sent over this many blocks."""


class BlockClock:
    """When each block number was first seen (monotonic), polling anvil directly."""

    def __init__(self, anvil: Anvil) -> None:
        self.anvil = anvil
        self.seen: dict[int, float] = {}
        self.wall: dict[int, float] = {}
        """The same instants on the wall clock (to compare with the daemon's stored times)."""
        self._stop = threading.Event()
        self._http = httpx.Client(timeout=5.0)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _number(self) -> int:
        answer = self._http.post(
            self.anvil.url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber"}
        )
        return int(answer.json()["result"], 16)

    def _run(self) -> None:
        while not self._stop.is_set():
            number = self._number()
            now, wall = time.monotonic(), time.time()
            for n in range(max(self.seen, default=number - 1) + 1, number + 1):
                self.wall.setdefault(n, wall)
                self.seen.setdefault(n, now)
            time.sleep(0.01)

    def head(self) -> int:
        """The highest block seen."""
        return max(self.seen, default=0)

    def wait_for(self, number: int, timeout: float = 60.0) -> float:
        """When block ``number`` was seen (waiting for it)."""
        deadline = time.monotonic() + timeout
        while number not in self.seen:
            if time.monotonic() > deadline:
                raise TimeoutError(f"block {number} never came")
            time.sleep(0.005)
        return self.seen[number]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Run:
    """One side's figures."""

    calls: int = 0
    blocks: int = 0
    latencies: list[float] = field(default_factory=list)
    by_method: dict[str, int] = field(default_factory=dict)
    stages: dict[str, list[float]] = field(default_factory=dict)
    """Daemon only: seconds from the depth-N block to the stored verdict, from the verdict
    to the stored receipt, from the stored receipt to the receipt in hand."""
    cpu_s: float = 0.0
    """Daemon only: its process's CPU seconds (user + system) over the whole run."""
    confirming: int = 0
    """Daemon only: the blocks the watched txs were mined in, each confirmed by its own
    depth-N block (a receipt's history proof costs one ``eth_getProof`` per such block)."""
    cpu_marks: tuple[float, float] = (0.0, 0.0)
    """Daemon only: its CPU seconds once started, and once the last tx was registered (what
    follows is mostly the finality path: verdicts, receipts, the waiting reads)."""

    @property
    def per_block(self) -> float:
        return self.calls / max(1, self.blocks)


def signed_txs(anvil: Anvil, count: int) -> list[tuple[str, bytes]]:
    """``count`` signed transfers from three dev accounts: (hash, raw)."""
    factories = [TxFactory(anvil, account) for account in range(3)]
    raws = [factories[i % 3].dynamic(max_fee=100 * 10**9) for i in range(count)]
    return [("0x" + keccak256(raw).hex(), raw) for raw in raws]


def send_spread(
    anvil: Anvil,
    clock: BlockClock,
    txs: list[tuple[str, bytes]],
    on_mined: Callable[[str, int], None] = lambda _tx, _block: None,
) -> dict[str, int]:
    """Send ``txs`` in :data:`SPREAD_BLOCKS` equal groups, one group per block; returns the
    block number each was mined in, told to ``on_mined`` as each block is seen (its tx
    hashes read from the node)."""
    size = -(-len(txs) // SPREAD_BLOCKS)  # contiguous slices keep each sender's nonces in order
    groups = [txs[i : i + size] for i in range(0, len(txs), size)]
    wanted = {tx_hash for tx_hash, _ in txs}
    mined: dict[str, int] = {}
    checked = clock.head()

    def collect() -> None:
        nonlocal checked
        head = clock.head()
        for number in range(checked + 1, head + 1):
            block = anvil.rpc("eth_getBlockByNumber", hex(number), False)
            for tx_hash in block["transactions"]:
                if tx_hash in wanted and tx_hash not in mined:
                    mined[tx_hash] = number
                    on_mined(tx_hash, number)
        checked = head

    for group in groups:
        if not group:
            continue
        start = clock.head()
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda t: anvil.rpc("eth_sendRawTransaction", "0x" + t[1].hex()), group))
        clock.wait_for(start + 1)
        collect()
    deadline = time.monotonic() + 30
    while len(mined) < len(wanted) and time.monotonic() < deadline:
        clock.wait_for(checked + 1)
        collect()
    assert len(mined) == len(wanted), f"{len(wanted) - len(mined)} txs never mined"
    return mined
