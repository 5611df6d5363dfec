"""The daemon proves its finality receipts by Ethereum consensus: anvil + a Beacon API.

A real anvil (``finalized`` = latest - 2) and the loopback Beacon API of the test beacon
chain (tests/support/beacon_server.py: known BLS keys, minimal preset, finality updates over
anvil's finalized block) feed a real daemon configured with ``beacon_api`` and
``consensus_checkpoint``. Its finality receipts carry a ``consensus`` section that
``finality verify --checkpoint`` (a process) accepts with no trust in the daemon's key; the
Beacon API is asked once for the bootstrap, once per period and not per receipt; a finality
update signed by a wrong committee or a beacon node that is down makes the receipt wait
(and its 404 says why), never the chain's verdicts.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.anvil import Anvil
from tests.support.beacon import execution_of
from tests.support.beacon_server import BeaconServer
from tests.support.daemon import Daemon, run_cli, wait_for

pytestmark = pytest.mark.anvil


@pytest.fixture(scope="module")
def anvil() -> Iterator[Anvil]:
    node = Anvil("--slots-in-an-epoch", "1")
    yield node
    node.stop()


@pytest.fixture(scope="module")
def beacon(anvil: Anvil) -> Iterator[BeaconServer]:
    server = BeaconServer(anvil)
    yield server
    server.close()


@pytest.fixture(scope="module")
def daemon(
    anvil: Anvil, beacon: BeaconServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    daemon = Daemon(
        tmp_path_factory.mktemp("consensus"),
        anvil.url,
        finality="finalized",
        confirmations=2,
        beacon_api=[beacon.url],
        consensus_checkpoint=beacon.checkpoint,
        consensus_network="minimal",
        # Polled, not woken by anvil's WebSocket heads: what this module tests is consensus,
        # not heads, and it runs in half the time. (Its two 30 s stalls with heads were a
        # tx registered after a poll that read no tags, nothing being watched: decided at
        # the next block only. A look-up now reads stale tags first: test_finality_modes.)
        heads="poll",
    )
    yield daemon
    daemon.close()


def in_one_block(anvil: Anvil, count: int) -> list[str]:
    """``count`` txs mined together in one block."""
    anvil.rpc("evm_setAutomine", False)
    try:
        txs = [anvil.send(value=i + 1) for i in range(count)]
        anvil.mine()
    finally:
        anvil.rpc("evm_setAutomine", True)
    for tx in txs:
        anvil.receipt(tx)
    return txs


def receipts_of(daemon: Daemon, anvil: Anvil, sids: list[str], timeout: float = 30) -> list[Any]:
    """Mine until every settlement has its receipt; the receipts. (Asked with ``?wait=0``:
    a plain GET of a terminal settlement's missing receipt holds for the API's 3 s receipt
    wait, so a block was mined only every 3 s.)"""
    got: dict[str, Any] = {}

    def done() -> bool:
        for sid in sids:
            if sid not in got:
                answer = daemon.get(f"/v1/settlements/{sid}/receipt?wait=0")
                if answer.status_code == 200:
                    got[sid] = answer.json()
        if len(got) == len(sids):
            return True
        anvil.mine()
        return False

    wait_for(done, timeout, interval=0.2, what="consensus-proven receipts")
    return [got[sid] for sid in sids]


def test_receipts_are_proven_by_consensus_and_verified_as_a_process(
    daemon: Daemon, anvil: Anvil, beacon: BeaconServer, tmp_path: Path
) -> None:
    sids = [daemon.register(tx)["settlement_id"] for tx in in_one_block(anvil, 4)]
    receipts = receipts_of(daemon, anvil, sids)
    for receipt in receipts:
        assert receipt["kind"] == "settlement_finality_receipt"
        assert receipt["consensus"]["checkpoint"] == beacon.checkpoint
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipts[0]))
    done = run_cli("verify", str(path), "--checkpoint", beacon.checkpoint)
    assert done.returncode == 0, done.stderr
    line = next(t for t in done.stdout.splitlines() if t.startswith("finalized by Ethereum"))
    assert line.startswith("finalized by Ethereum consensus: 32/32 sync committee signatures")
    block = int(receipts[0]["proof"]["headers"][0]["number"], 16)
    assert int(line.split("execution block ")[1].split()[0]) >= block
    elsewhere = beacon.signer.bootstrap(3 * 64 + 9, execution_of(anvil.block(0)))[1]
    refused = run_cli("verify", str(path), "--checkpoint", elsewhere)  # not on this chain
    assert refused.returncode == 1
    assert "invalid: consensus: checkpoint mismatch" in refused.stderr

    # Light-client data is fetched per period and per finality update, not per receipt.
    assert beacon.calls["bootstrap"] == 1
    assert beacon.calls["updates"] == 1  # periods 3 and 4 in one call
    first = beacon.calls["finality_update"]
    more = [daemon.register(tx)["settlement_id"] for tx in in_one_block(anvil, 4)]
    receipts_of(daemon, anvil, more)
    assert beacon.calls["bootstrap"] == 1 and beacon.calls["updates"] == 1
    assert beacon.calls["finality_update"] - first < 4  # four receipts, fewer calls


def test_a_new_period_is_handed_over_once(
    daemon: Daemon, anvil: Anvil, beacon: BeaconServer
) -> None:
    beacon.period = 6  # the chain moves into the next sync-committee period
    sids = [daemon.register(tx)["settlement_id"] for tx in in_one_block(anvil, 2)]
    receipts = receipts_of(daemon, anvil, sids)
    assert [len(r["consensus"]["updates"]) for r in receipts] == [3, 3]  # periods 3, 4, 5
    assert beacon.calls["updates"] == 2  # period 5's hand-over, once


def test_wrong_committee_or_beacon_down_makes_the_receipt_wait(
    daemon: Daemon, anvil: Anvil, beacon: BeaconServer
) -> None:
    for fault in ("signing_period", "fail"):
        setattr(beacon, fault, 4 if fault == "signing_period" else True)
        try:
            (tx,) = in_one_block(anvil, 1)
            sid = daemon.register(tx)["settlement_id"]
            anvil.mine(4)  # beyond anvil's finalized: the verdict does not wait
            daemon.wait_verdict(sid, "FINALITY_CONFIRMED")
            wait_for(
                functools.partial(waits_for_consensus, daemon, sid),
                30,
                interval=0.05,
                what="the receipt waiting for consensus",
            )
            if fault == "fail":  # alerted and shown as an RPC endpoint is
                wait_for(lambda: beacon_event(daemon, beacon, "rpc_unhealthy"), 30, what="alert")
                (chain,) = daemon.get("/v1/chains").json()
                assert [e["endpoint"] for e in chain["beacon_api"]] == [beacon.url]
                assert chain["beacon_api"][0]["state"] in ("open", "half_open")
                assert chain["healthy"]  # the chain's own verdicts go on
        finally:
            beacon.signing_period, beacon.fail = None, False
        (receipt,) = receipts_of(daemon, anvil, [sid])  # the node recovered: it is proven
        assert "consensus" in receipt
    wait_for(lambda: beacon_event(daemon, beacon, "rpc_recovered"), 30, what="recovered")


def test_healthz_names_a_beacon_api_that_is_gone_and_its_recovery(
    daemon: Daemon, anvil: Anvil, beacon: BeaconServer
) -> None:
    beacon.stop()  # connections refused: every Beacon API endpoint of the chain is down
    try:
        (tx,) = in_one_block(anvil, 1)
        sid = daemon.register(tx)["settlement_id"]
        anvil.mine(4)
        daemon.wait_verdict(sid, "FINALITY_CONFIRMED")  # verdicts go on without it
        wait_for(lambda: daemon.get("/healthz").status_code == 503, 60, what="healthz 503")
        health = daemon.get("/healthz")
        assert health.status_code == 503 and not health.json()["ok"], health.text
        (chain,) = health.json()["chains"].values()
        assert chain["healthy"]  # the chain is followed; its receipts are what waits
        (gone,) = chain["beacon_api_unused"]
        assert gone["endpoint"] == beacon.url and gone["state"] in ("open", "half_open")
        assert gone["reason"] and gone["reason"] not in ("open", "half_open"), gone
        waiting = chain["receipts_waiting"]
        assert "every Beacon API endpoint is down" in waiting and beacon.url in waiting
        assert "[[chains]] beacon_api" in waiting  # what the operator must do
    finally:
        beacon.start()
    receipts_of(daemon, anvil, [sid], timeout=60)  # the node is back: the receipt is proven
    wait_for(lambda: daemon.get("/healthz").status_code == 200, 60, what="healthz recovered")
    (chain,) = daemon.get("/healthz").json()["chains"].values()
    assert chain["beacon_api_unused"] == [] and chain["receipts_waiting"] is None


def waits_for_consensus(daemon: Daemon, sid: str) -> bool:
    """Whether the settlement's receipt is refused (404) saying it waits for Ethereum
    consensus; an assertion error if it was signed. Asked with ``?wait=0``: without it each
    GET of a terminal settlement's missing receipt holds for the API's 3 s receipt wait."""
    answer = daemon.get(f"/v1/settlements/{sid}/receipt?wait=0")
    assert answer.status_code == 404, answer.text
    return "waiting for Ethereum consensus" in answer.json()["error"]


def beacon_event(daemon: Daemon, beacon: BeaconServer, kind: str) -> bool:
    """Whether an event of ``kind`` names the Beacon API endpoint."""
    events = daemon.get("/v1/events?limit=1000").json()
    items = events if isinstance(events, list) else events.get("items", [])
    return any(
        e.get("kind") == kind and (e.get("payload") or {}).get("endpoint") == beacon.url
        for e in items
    )


def test_after_kill_9_the_committee_chain_comes_from_the_store(
    daemon: Daemon, anvil: Anvil, beacon: BeaconServer
) -> None:
    receipts_of(daemon, anvil, [daemon.register(in_one_block(anvil, 1)[0])["settlement_id"]])
    asked = (beacon.calls["bootstrap"], beacon.calls["updates"])
    daemon.kill9()
    daemon.start()
    sids = [daemon.register(tx)["settlement_id"] for tx in in_one_block(anvil, 2)]
    for receipt in receipts_of(daemon, anvil, sids):
        assert receipt["consensus"]["bootstrap"] == beacon.bootstrap
    assert (beacon.calls["bootstrap"], beacon.calls["updates"]) == asked  # none asked again
