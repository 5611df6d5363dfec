"""What signed receipts cost in JSON-RPC calls, run by hand:
``.venv/bin/python -m bench.receipts_cost [--w 1 100 1000] [--n 12] [--block-time 0.5]``.

The scenario of the issue, against a real anvil mining a block every ``--block-time``
seconds, every call counted by a proxy in front of it (bench/proxy.py):

* **daemon**: ``finality run`` as shipped (a process, receipts on), pointed at the proxy;
  the count starts before it starts (start-up calls count). W txs are signed here and sent
  over 10 blocks; half are registered (``POST /v1/settlements``) before they are sent, half
  after they are mined. The run ends when every watched tx's signed receipt has been fetched
  from the API (``GET /v1/settlements/{id}/receipt``) by its own client, asking from the tx's
  depth-N block on (bench/receipt_clients.py). ``--facts`` runs it again with each
  registration carrying its ``raw_tx`` (sender and nonce known: no lookup by hash).
* **naive loop**, same anvil, same run, its own proxy and its own W txs: every poll one
  ``eth_blockNumber`` and one ``eth_getTransactionReceipt`` per tx not yet N deep (a verdict,
  no receipt).

Printed per run: calls in total and per block, the issue's bound (W + 2 x blocks; with the
facts, 2 x blocks + 2), and the time from a tx's depth-N block (seen by a separate watcher
polling anvil directly every 10 ms) to its signed receipt in hand (daemon) or its verdict
(naive): median, p95, max; each with the naive loop's figure beside it as a ratio.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.common import Anvil, p95
from bench.proxy import CountingProxy
from bench.receipt_clients import ReceiptClients
from guard.hashing import keccak256
from tests.integration.receipts_helpers import TxFactory
from tests.support.daemon import CHAIN, Daemon

SPREAD_BLOCKS = 10
"""The W txs are sent over this many blocks."""

RETRY_S = 0.1
"""A client asks again for a receipt not signed yet after this long (the API itself waits
for one being built: only a verdict not reached yet answers at once)."""

REGISTRARS = 4
"""Registrations sent at once (the callers of W txs do not queue behind one another)."""


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

    @property
    def per_block(self) -> float:
        return self.calls / max(1, self.blocks)


def _signed_txs(anvil: Anvil, count: int) -> list[tuple[str, bytes]]:
    """``count`` signed transfers from three dev accounts: (hash, raw)."""
    factories = [TxFactory(anvil, account) for account in range(3)]
    raws = [factories[i % 3].dynamic(max_fee=100 * 10**9) for i in range(count)]
    return [("0x" + keccak256(raw).hex(), raw) for raw in raws]


def _send_spread(
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


def run_daemon(anvil: Anvil, w: int, n: int, block_time: float, facts: bool) -> Run:
    """The daemon's side of the scenario (see the module doc)."""
    clock = BlockClock(anvil)
    proxy = CountingProxy(anvil.url)
    txs = _signed_txs(anvil, w)
    first_block = clock.head()
    with tempfile.TemporaryDirectory(prefix="fw-cost-") as tmp:
        daemon = Daemon(
            Path(tmp), proxy.url, confirmations=n, poll_interval_s=block_time, start=True
        )
        try:
            http = httpx.Client(base_url=daemon.url, timeout=30.0)
            busy: list[str] = []

            def register(tx: tuple[str, bytes]) -> str:
                body: dict[str, object] = {"chain": CHAIN, "tx_hash": tx[0]}
                if facts:
                    body["raw_tx"] = "0x" + tx[1].hex()
                answer = http.post("/v1/settlements", json=body)
                while answer.status_code == 503:  # the store busy: a caller tries again
                    busy.append(answer.text)
                    time.sleep(RETRY_S)
                    answer = http.post("/v1/settlements", json=body)
                assert answer.status_code in (200, 201), answer.text
                return str(answer.json()["settlement_id"])

            clients = ReceiptClients(daemon.url, clock, n, RETRY_S)

            def registered(tx: tuple[str, bytes]) -> str:
                sid = register(tx)
                clients.registered(tx[0], sid, time.monotonic())
                return sid

            before, after = txs[0::2], txs[1::2]
            with ThreadPoolExecutor(REGISTRARS) as pool:  # callers register concurrently
                ids = dict(zip([t[0] for t in before], pool.map(registered, before), strict=True))
                mined = _send_spread(anvil, clock, txs, clients.mined)
                ids.update(zip([t[0] for t in after], pool.map(registered, after), strict=True))
            latencies = clients.latencies(len(txs))
            stages = {**_stages(daemon, clock, ids, mined, n, clients.fetched), **clients.stages}
            if clients.errors:
                print(
                    f"   ({len(clients.errors)} receipt requests failed, asked again: "
                    f"{clients.errors[0]})"
                )
            if busy:
                print(f"   ({len(busy)} registrations answered 503 and sent again: {busy[0]})")
            retried = [line for line in daemon.log().splitlines() if "not built yet" in line]
            if retried:
                print(f"   ({len(retried)} receipts retried, e.g. {retried[0][-160:]})")
        finally:
            daemon.close()
    run = Run(proxy.total(), clock.head() - first_block, latencies, dict(proxy.calls), stages)
    proxy.close()
    clock.stop()
    return run


def _stages(
    daemon: Daemon,
    clock: BlockClock,
    ids: dict[str, str],
    mined: dict[str, int],
    n: int,
    fetched: dict[str, float],
) -> dict[str, list[float]]:
    """Where the time went, per tx (wall clock, from the daemon's store)."""
    rows = daemon.query(
        "SELECT s.tx_hash, s.terminal_at, MIN(r.created_at) FROM settlements s "
        "JOIN receipts r ON r.settlement_id = s.settlement_id "
        "WHERE r.kind = 'settlement_finality_receipt' GROUP BY s.tx_hash, s.terminal_at"
    )
    out: dict[str, list[float]] = {"verdict": [], "receipt": [], "fetch": []}
    for tx_hash, terminal_at, created_at in rows:
        if tx_hash not in ids or terminal_at is None:
            continue
        block = clock.wall[mined[tx_hash] + n - 1]
        out["verdict"].append(terminal_at / 1000 - block)
        out["receipt"].append((created_at - terminal_at) / 1000)
        out["fetch"].append(fetched[tx_hash] - created_at / 1000)
    return out


def run_naive(anvil: Anvil, w: int, n: int, block_time: float) -> Run:
    """The naive loop (see the module doc) over its own W txs, registered the same way."""
    clock = BlockClock(anvil)
    proxy = CountingProxy(anvil.url)
    txs = _signed_txs(anvil, w)
    first_block = clock.head()
    rpc = httpx.Client(timeout=30.0)
    watched: set[str] = set()
    done: dict[str, float] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            with lock:
                todo = sorted(watched - set(done))
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
            answers = {a["id"]: a.get("result") for a in rpc.post(proxy.url, json=calls).json()}
            head = int(str(answers[0]), 16)
            for i, h in enumerate(todo):
                receipt = answers.get(i + 1)
                if isinstance(receipt, dict) and head - int(receipt["blockNumber"], 16) + 1 >= n:
                    done[h] = time.monotonic()
            time.sleep(block_time)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    before, after = txs[0::2], txs[1::2]
    registered_at: dict[str, float] = {}
    with lock:
        for tx_hash, _ in before:
            watched.add(tx_hash)
            registered_at[tx_hash] = time.monotonic()
    mined = _send_spread(anvil, clock, txs)
    with lock:
        for tx_hash, _ in after:
            watched.add(tx_hash)
            registered_at[tx_hash] = time.monotonic()
    latencies = []
    for tx_hash, _ in txs:
        since = max(clock.wait_for(mined[tx_hash] + n - 1), registered_at[tx_hash])
        while tx_hash not in done:
            time.sleep(0.005)
        latencies.append(max(0.0, done[tx_hash] - since))
    stop.set()
    thread.join()
    run = Run(proxy.total(), clock.head() - first_block, latencies, dict(proxy.calls))
    proxy.close()
    clock.stop()
    return run


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x naive" if theirs else "n/a"


def _lat(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), p95(values), max(values)


def report(label: str, ours: Run, naive: Run, w: int, facts: bool) -> None:
    """Print one scenario with the naive loop beside it."""
    bound = 2 * ours.blocks + 2 if facts else w + 2 * ours.blocks
    verdict = "ok" if ours.calls <= bound else "OVER"
    print(f"-- {label}")
    print(
        f"   calls: daemon {ours.calls} over {ours.blocks} blocks ({ours.per_block:.2f}/block), "
        f"bound {bound} [{verdict}]; naive {naive.calls} over {naive.blocks} blocks "
        f"({naive.per_block:.2f}/block); {_ratio(ours.calls, naive.calls)}, "
        f"per block {_ratio(ours.per_block, naive.per_block)}"
    )
    ours_lat, naive_lat = _lat(ours.latencies), _lat(naive.latencies)
    print(
        "   depth-N block -> signed receipt in hand (daemon) / verdict (naive): "
        + ", ".join(
            f"{name} {o:.2f} s vs {t:.2f} s ({_ratio(o, t)})"
            for name, o, t in zip(("median", "p95", "max"), ours_lat, naive_lat, strict=True)
        )
    )
    print(f"   daemon calls by method: {dict(sorted(ours.by_method.items()))}")
    if ours.stages.get("verdict"):
        print(
            "   daemon stages (median / max): "
            + ", ".join(
                f"{name} {statistics.median(v):.2f} / {max(v):.2f} s"
                for name, v in (
                    ("depth-N block -> verdict stored", ours.stages["verdict"]),
                    ("verdict -> receipt stored", ours.stages["receipt"]),
                    ("receipt stored -> in hand", ours.stages["fetch"]),
                )
            )
        )
        print(
            "   client (median / max): depth-N block -> first ask "
            f"{statistics.median(ours.stages['queued']):.2f} / {max(ours.stages['queued']):.2f} s, "
            f"asks per receipt {statistics.median(ours.stages['asks']):.0f} / "
            f"{max(ours.stages['asks']):.0f}, the answering GET "
            f"{statistics.median(ours.stages['answer']) * 1e3:.0f} / "
            f"{max(ours.stages['answer']) * 1e3:.0f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--w", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument("--n", type=int, default=12, help="confirmations N")
    parser.add_argument("--block-time", type=float, default=0.5)
    parser.add_argument("--facts", action="store_true", help="also register with raw_tx")
    args = parser.parse_args()
    for w in args.w:
        # A fresh node per W: the naive loop and the daemon share it, one after the other.
        with Anvil("--block-time", str(args.block_time)) as anvil:
            naive = run_naive(anvil, w, args.n, args.block_time)
            runs: list[tuple[str, bool]] = [("probe", False)] + (
                [("facts", True)] if args.facts else []
            )
            for _name, facts in runs:
                ours = run_daemon(anvil, w, args.n, args.block_time, facts)
                label = (
                    f"W = {w}, N = {args.n}, a block every {args.block_time:g} s, "
                    f"registration {'with raw_tx' if facts else 'by hash only'}"
                )
                report(label, ours, naive, w, facts)


if __name__ == "__main__":
    main()
