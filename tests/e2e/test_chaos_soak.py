"""Chaos soak: the daemon over three faulty proxies (quorum 2 of 3) while faults and reorgs
come and go at random; at the end every settlement has the verdict the final chain gives.

Bounded (``SOAK_SETTLEMENTS`` settlements, about a minute, loopback only). The right verdict
is computed from the node itself after the chaos: a tx with a receipt at depth ≥ N must be
``FINALITY_CONFIRMED`` in that very block; a tx the reorgs erased must not be confirmed. No
reorg is deeper than N - 1, so no confirmed settlement may ever have been wrong.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import requests

from guard.receipts import FINALITY
from guard.verify import verify_receipt
from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon, wait_for
from tests.support.faulty_proxy import FAULTS, FaultyProxy

SOAK_SETTLEMENTS = int(os.environ.get("FINALITY_SOAK_SETTLEMENTS", "300"))
"""300 keeps the suite fast (about 30 s); ``FINALITY_SOAK_SETTLEMENTS=1000`` for the long run."""
CONFIRMATIONS = 3
MIN_FAULTS = 3
"""Faults every run makes at least: the chaos goes on until it has made them, however quickly
the registrations went (alone on the machine, 300 take about a second, and a run once ended
with two)."""
REORG_P = float(os.environ.get("FINALITY_SOAK_REORG_P", "0.4"))
"""Chance that a fault round also reorgs the node. Long runs may want fewer: after hundreds
of ``anvil_reorg`` calls anvil itself stops serving some replaced heights."""


class Chaos:
    """A thread that mines a block every 0.2 s and, every 0.8-2 s, ends all faults and
    starts one at random on one proxy, and every few rounds reorgs the node (depth 1..N-1,
    txs re-included). ``lock`` serialises every change of the node (anvil's reorg is not
    safe against concurrent mining)."""

    def __init__(self, anvil: Anvil, proxies: list[FaultyProxy], seed: int) -> None:
        self.anvil = anvil
        self.proxies = proxies
        self.rng = random.Random(seed)
        self.faults = 0
        self.reorgs = 0
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos", daemon=True)

    def _run(self) -> None:
        try:
            next_fault = time.monotonic()
            while not self._stop.wait(0.2):
                with self.lock:
                    self.anvil.mine(1)
                if time.monotonic() < next_fault:
                    continue
                next_fault = time.monotonic() + self.rng.uniform(0.8, 2.0)
                for proxy in self.proxies:
                    proxy.clear()
                self.rng.choice(self.proxies).inject(self.rng.choice(FAULTS))
                self.faults += 1
                if self.rng.random() < REORG_P:
                    with self.lock:
                        self._reorg(self.rng.randint(1, CONFIRMATIONS - 1))
        except BaseException as exc:
            self.error = exc

    def _reorg(self, depth: int) -> None:
        """Replace the last ``depth`` blocks, putting their txs back (in order)."""
        head = self.anvil.head()
        raws: list[tuple[str, int]] = []
        for number in range(head - depth + 1, head + 1):
            for tx in self.anvil.block(number)["transactions"]:
                tx_hash = tx if isinstance(tx, str) else tx["hash"]
                raws.append((self.anvil.raw_tx(tx_hash), 0))
        self.anvil.reorg(depth, raws)
        self.reorgs += 1

    def start(self) -> None:
        self._thread.start()

    def go_on(self, seconds: float, faults: int) -> None:
        """Let the chaos go on for ``seconds`` more, and until it has made ``faults`` faults in
        all (a round every 0.8-2 s; a thread that died ends the wait, and :meth:`stop`
        raises what killed it)."""
        until = time.monotonic() + seconds
        while (time.monotonic() < until or self.faults < faults) and self._thread.is_alive():
            self._stop.wait(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for proxy in self.proxies:
            proxy.clear()
        if self.error is not None:
            raise self.error


def _send_batch(anvil: Anvil, count: int, session: requests.Session) -> list[str]:
    body: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "eth_sendTransaction",
            "params": [{"from": anvil.accounts[i % 5], "to": anvil.accounts[9], "value": "0x1"}],
        }
        for i in range(count)
    ]
    answers = session.post(anvil.url, json=body, timeout=30).json()
    return [a["result"] for a in sorted(answers, key=lambda a: a["id"]) if "result" in a]


def check_receipts(
    daemon: Daemon, ids: dict[str, str], truth: dict[str, tuple[str, str | None]]
) -> int:
    """No receipt contradicts the final chain: every unrevoked finality receipt verifies
    offline with the daemon's published key and proves the tx in the block the node now has
    (all settlements up to 1,000, else a random 1,000). Returns how many were checked."""
    signers = [s["address"] for s in daemon.get("/v1/signers").json()]
    sample = list(ids.items())
    if len(sample) > 1000:
        sample = random.Random(3).sample(sample, 1000)
    deadline = time.monotonic() + 60
    checked = 0
    for tx, sid in sample:
        kind, block_hash = truth[tx]
        while True:
            rows = daemon.get(f"/v1/settlements/{sid}/receipts").json()
            current = [r for r in rows if r["revoked_by"] is None and r["kind"] == FINALITY]
            if current or kind != "FINALITY_CONFIRMED" or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # built in the poll after the verdict: wait for it
        assert current or kind != "FINALITY_CONFIRMED", f"{tx}: no finality receipt in time"
        for row in current:
            verified = verify_receipt(row["receipt"], trusted_signers=signers)
            assert kind == "FINALITY_CONFIRMED", f"{tx}: a finality receipt for an erased tx"
            assert verified.facts.block_hash == block_hash, (tx, verified.facts, block_hash)
            checked += 1
    return checked


@pytest.mark.timeout(300)  # a hang's deadline: 88 s at load 10, 118-125 s at load 12
def test_soak_every_settlement_ends_with_the_right_verdict(
    start_anvil: Callable[..., Anvil], make_daemon: Callable[..., Daemon]
) -> None:
    anvil = start_anvil()
    proxies = [FaultyProxy(anvil.url) for _ in range(3)]
    daemon = make_daemon(
        proxies[0].url,
        rpc=[p.url for p in proxies],
        quorum=2,
        confirmations=CONFIRMATIONS,
        poll_interval_s=0.2,  # a poll per block the chaos mines (each through three proxies)
        rpc_timeout_s=1.0,
        rpc_backoff_s=0.2,
    )
    session = requests.Session()
    chaos = Chaos(anvil, proxies, seed=int(os.environ.get("FINALITY_SOAK_SEED", "7")))
    ids: dict[str, str] = {}
    started = time.monotonic()
    chaos.start()
    try:
        while len(ids) < SOAK_SETTLEMENTS:
            with chaos.lock:
                sent = _send_batch(anvil, min(50, SOAK_SETTLEMENTS - len(ids)), session)
            for tx in sent:
                answer = daemon.post("/v1/settlements", {"chain": CHAIN, "tx_hash": tx})
                assert answer.status_code in (200, 201), answer.text
                ids[tx] = answer.json()["settlement_id"]
        chaos.go_on(3.0, MIN_FAULTS)  # a little more chaos after the last registration
    finally:
        chaos.stop()
    time.sleep(1.0)
    anvil.mine(CONFIRMATIONS + 1)
    head = anvil.head()
    # The node itself is intact: every height has a block (else the test proves nothing).
    # (Right after mining blocks full of transactions anvil may report the new head a moment
    # before it serves the blocks: missing heights are asked again for a few seconds.)
    missing: list[int] = []
    for first in range(0, head + 1, 200):  # anvil caps the size of a batch
        body: list[dict[str, Any]] = [
            {"jsonrpc": "2.0", "id": n, "method": "eth_getBlockByNumber", "params": [hex(n), False]}
            for n in range(first, min(head + 1, first + 200))
        ]
        answers = session.post(anvil.url, json=body, timeout=30).json()
        missing += [int(a["id"]) for a in answers if not a.get("result")]
    deadline = time.monotonic() + 10
    while missing and time.monotonic() < deadline:
        time.sleep(0.5)
        missing = [n for n in missing if anvil.rpc("eth_getBlockByNumber", hex(n), False) is None]
    assert not missing, f"anvil has no block at heights {missing[:10]} (head {head})"

    def expected(tx: str) -> tuple[str, str | None]:
        receipt = anvil.rpc("eth_getTransactionReceipt", tx)
        if receipt is None:
            return "ERASED", None
        return "FINALITY_CONFIRMED", receipt["blockHash"]

    truth = {tx: expected(tx) for tx in ids}
    assert all(
        int(anvil.receipt(tx)["blockNumber"], 16) + CONFIRMATIONS - 1 <= head
        for tx, (kind, _) in truth.items()
        if kind != "ERASED"
    )

    def listed() -> dict[str, Any]:
        """Each settlement's view by tx, from the listing (a page of 500 per request, not a
        GET per settlement every second: the same views, read as a caller would)."""
        by_id = {view["settlement_id"]: view for view in daemon.settlements()}
        return {tx: by_id[sid] for tx, sid in ids.items()}

    def views() -> dict[str, Any] | None:
        out = listed()
        settled = all(
            out[tx]["verdict"] == kind for tx, (kind, _) in truth.items() if kind != "ERASED"
        )
        return out if settled else None

    try:
        final = wait_for(views, timeout=90, interval=1.0, what="every settlement to settle")
    except TimeoutError:
        out = listed()
        wrong = [
            (truth[tx], v)
            for tx, v in out.items()
            if truth[tx][0] != "ERASED" and v["verdict"] != truth[tx][0]
        ]
        chains = daemon.get("/v1/chains").json()
        raise AssertionError(
            f"{len(wrong)} unsettled, e.g. {wrong[:2]}; chains {chains}; "
            f"log tail {daemon.log_path.read_text()[-3000:]}"
        ) from None
    for tx, (kind, block_hash) in truth.items():
        view = final[tx]
        if kind == "ERASED":
            assert view["verdict"] != "FINALITY_CONFIRMED", view
        else:
            assert view["block_hash"] == block_hash, view
    receipts_checked = check_receipts(daemon, ids, truth)
    assert receipts_checked > 0, "no finality receipt was signed"
    elapsed = time.monotonic() - started
    chains = daemon.get("/v1/chains").json()
    endpoints = chains[0]["rpc"]
    assert len(endpoints) == 3 and all("state" in e for e in endpoints)
    metrics = daemon.get("/metrics").text
    assert "finality_rpc_endpoint_up" in metrics
    print(
        f"soak: {len(ids)} settlements, {chaos.faults} faults, {chaos.reorgs} reorgs, "
        f"{receipts_checked} receipts verified, {elapsed:.1f} s"
    )
    assert chaos.faults >= MIN_FAULTS
