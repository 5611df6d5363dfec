"""The daemon as a process: clean shutdown, kill -9 at random moments, catch-up after downtime."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable

import pytest

from tests.e2e.helpers import Miner
from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon, wait_for

pytestmark = pytest.mark.anvil

MakeDaemon = Callable[..., Daemon]


def assert_no_header_gap(daemon: Daemon) -> tuple[int, int]:
    [(low, high, count)] = daemon.query(
        "SELECT min(number), max(number), count(*) FROM headers WHERE chain = ?", CHAIN
    )
    assert count > 0
    assert count == high - low + 1, f"headers {low}..{high} hold only {count} rows"
    return low, high


def assert_stored_head_matches_node(daemon: Daemon, anvil: Anvil, high: int) -> None:
    """The stored headers are the node's canonical ones (checked at the top)."""
    [(stored_hash,)] = daemon.query(
        "SELECT hash FROM headers WHERE chain = ? AND number = ?", CHAIN, high
    )
    assert stored_hash == anvil.block(high)["hash"]


def confirmations_recorded(daemon: Daemon, settlement_id: str) -> int:
    """How many ``settlement_confirmed`` events the settlement's event list shows."""
    return sum(1 for e in daemon.events(settlement_id) if e["kind"] == "settlement_confirmed")


def test_sigusr1_again_and_again_while_the_daemon_works_never_kills_it(
    anvil: Anvil, make_daemon: MakeDaemon
) -> None:
    # faulthandler's own SIGUSR1 handler read the other threads' frames while they ran: a
    # daemon answering requests and polling every 0.1 s died of SIGSEGV within 3 dumps.
    daemon = make_daemon(anvil.url, poll_interval_s=0.1)
    assert daemon.proc is not None
    busy = threading.Event()

    def requests() -> None:
        while not busy.is_set():
            daemon.get("/v1/chains")

    worker = threading.Thread(target=requests)
    worker.start()
    try:
        for _ in range(60):
            os.kill(daemon.proc.pid, signal.SIGUSR1)
            anvil.mine(1)
            assert daemon.proc.poll() is None, daemon.log_tail()
    finally:
        busy.set()
        worker.join()
    assert daemon.log().count("most recent call first") >= 60
    assert daemon.terminate(timeout=30.0) == 0, daemon.log_tail()


def test_sigterm_exits_0_with_summary_and_sigusr1_shows_the_stacks(
    anvil: Anvil, make_daemon: MakeDaemon
) -> None:
    daemon = make_daemon(anvil.url)
    tx = anvil.send()
    sid = daemon.register(tx)["settlement_id"]
    anvil.mine(3)
    daemon.wait_verdict(sid, "FINALITY_CONFIRMED")
    # kill -USR1 shows where every thread is, and the daemon goes on (it exits cleanly below).
    stacks = daemon.stacks()
    assert "most recent call first" in stacks and "watcher/" in stacks, stacks
    code = daemon.terminate(timeout=30.0)  # a clean exit (fails only if it never exits)
    assert code == 0, daemon.log_tail()
    summary = [line for line in daemon.log().splitlines() if "stopped after" in line]
    assert len(summary) == 1, daemon.log_tail()
    assert "local/FINALITY_CONFIRMED=1" in summary[0]
    assert "Traceback" not in daemon.log()


def test_kill_9_loses_nothing(anvil: Anvil, make_daemon: MakeDaemon) -> None:
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    print(f"kill -9 schedule seed: {seed}")  # shown on failure, to replay the schedule
    daemon = make_daemon(anvil.url, poll_interval_s=0.1)
    expected: dict[str, str] = {}  # settlement id -> tx hash

    def send_and_register(i: int) -> None:
        tx = anvil.send(value=1000 + i)
        sid = daemon.register(tx, confirmations=6 + 2 * i)["settlement_id"]
        expected[sid] = tx

    for i in range(5):
        send_and_register(i)
    with Miner(anvil, interval=0.1) as miner:
        for round_ in range(5):
            time.sleep(rng.uniform(0.1, 0.6))  # a random moment, not a wait for a condition
            daemon.kill9()
            if rng.random() < 0.5:
                time.sleep(rng.uniform(0.0, 0.3))  # blocks keep coming while it is down
            daemon.restart()
            send_and_register(5 + round_)
        assert len(expected) == 10
        for sid in expected:
            daemon.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=20)
    assert miner.blocks > 0
    assert daemon.starts == 6

    # Every settlement: confirmed once, at the block the node says, with its receipt.
    for sid, tx in expected.items():
        view = daemon.settlement(sid)
        mined = anvil.receipt(tx)
        assert view["block_number"] == int(mined["blockNumber"], 16), (seed, sid)
        assert view["block_hash"] == mined["blockHash"], (seed, sid)
        assert view["receipt"] is not None
    verdicts = {view["settlement_id"]: view["verdict"] for view in daemon.settlements()}
    assert verdicts == dict.fromkeys(expected, "FINALITY_CONFIRMED")
    confirmed = {sid: confirmations_recorded(daemon, sid) for sid in verdicts}
    assert confirmed == dict.fromkeys(expected, 1), f"seed {seed}"
    _, high = assert_no_header_gap(daemon)
    assert_stored_head_matches_node(daemon, anvil, high)
    assert daemon.terminate(timeout=30.0) == 0


def test_restart_catches_up(anvil: Anvil, make_daemon: MakeDaemon) -> None:
    daemon = make_daemon(anvil.url, poll_interval_s=0.1)
    anvil.rpc("evm_setAutomine", False)
    pending = anvil.send(value=5)
    sid = daemon.register(pending)["settlement_id"]
    wait_for(
        lambda: [s for s in daemon.timeline(sid) if s["step"] == "seen_pending"],
        10,
        what="the pending tx probed (its sender and nonce known)",
    )
    daemon.kill9()

    anvil.mine(150)  # the pending tx goes into the first of these
    anvil.rpc("evm_setAutomine", True)
    late = anvil.send(value=6)  # sent and mined while the daemon is down
    late_block = int(anvil.receipt(late)["blockNumber"], 16)
    anvil.mine(150)
    node_head = anvil.head()
    pending_block = int(anvil.receipt(pending)["blockNumber"], 16)
    assert node_head - pending_block >= 300

    daemon.start()
    daemon.wait_head(node_head, anvil.block(node_head)["hash"], timeout=20)
    view = daemon.wait_verdict(sid, "FINALITY_CONFIRMED")
    assert view["block_number"] == pending_block
    assert view["confirmations"] == node_head - pending_block + 1

    late_view = daemon.register(late)
    final = daemon.wait_verdict(late_view["settlement_id"], "FINALITY_CONFIRMED")
    assert final["block_number"] == late_block

    _, high = assert_no_header_gap(daemon)
    assert high == node_head
    assert_stored_head_matches_node(daemon, anvil, high)
    assert confirmations_recorded(daemon, sid) == 1
    assert_quiet_start_ups(daemon.log())


def assert_quiet_start_ups(log: str) -> None:
    """One line per operator fact at each start: the schema migrated once, in one line (the
    libraries' per-revision and server lines are at debug)."""
    first, second = log.split("--- start #")[1:3]
    for start in (first, second):
        assert "alembic" not in start and "uvicorn" not in start, start
        assert sum("finality watcher: API on" in line for line in start.splitlines()) == 1
    [migrated] = [line for line in first.splitlines() if "schema" in line]
    assert "store: schema migrated from empty to " in migrated
    assert "schema" not in second  # nothing to migrate: said at debug only
