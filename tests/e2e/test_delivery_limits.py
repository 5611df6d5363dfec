"""Hostile receivers cannot hurt the daemon or other callers (a real daemon, real sockets):
a 200 with an endless body is recorded delivered without the body being read into memory;
receivers that trickle their answer a byte at a time hold at most ``max_per_destination``
workers, each attempt ends at its deadline, another caller's commit goes out meanwhile, and
the rows die at ``max_attempts`` instead of being claimed for ever."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, wait_for
from tests.support.hostile_receiver import HostileReceiver
from tests.support.receiver import Receiver

pytestmark = pytest.mark.anvil

DELIVERY = {
    "max_attempts": 2,
    "backoff_initial_s": 0.2,
    "backoff_max_s": 0.5,
    "timeout_s": 3.0,
    "receipt_wait_s": 5.0,
    "workers": 2,
    "max_per_destination": 1,
}


@pytest.fixture(scope="module")
def good() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


@pytest.fixture(scope="module")
def daemon(
    module_anvil: Anvil, good: Receiver, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("limits"), module_anvil.url, start=False)
    d.config_path.write_text(d.config_path.read_text() + good.daemon_config(None, (), **DELIVERY))
    d.start()
    yield d
    d.close()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def commit_rows(daemon: Daemon, sid: str) -> list[dict[str, Any]]:
    rows = daemon.get("/v1/deliveries", params={"settlement_id": sid}).json()
    return [r for r in rows if r["channel"] == "commit"]


def register(daemon: Daemon, anvil: Anvil, url: str) -> str:
    tx = anvil.send()
    return str(daemon.register(tx, dependent_state={"tx": tx}, commit_url=url)["settlement_id"])


def test_an_endless_answer_body_is_not_read(daemon: Daemon, module_anvil: Anvil) -> None:
    assert daemon.proc is not None
    before = rss_bytes(daemon.proc.pid)
    with HostileReceiver("endless", most_bytes=192 << 20) as endless:
        sid = register(daemon, module_anvil, endless.url("/commit"))
        module_anvil.mine(3)

        def delivered() -> dict[str, Any] | None:
            rows = commit_rows(daemon, sid)
            return rows[0] if rows and rows[0]["state"] == "delivered" else None

        row = wait_for(delivered, 60, what="the commit recorded as delivered")
        assert row["last_status"] == 200 and row["attempts"] == 1, row
        grown = rss_bytes(daemon.proc.pid) - before
        assert grown < 64 << 20, f"RSS grew by {grown >> 20} MiB"
        # The receiver wrote what the socket buffers took, then the daemon hung up.
        assert endless.sent < 64 << 20, endless.sent


def test_slow_receivers_hold_one_worker_and_die_at_the_cap(
    daemon: Daemon, module_anvil: Anvil, good: Receiver
) -> None:
    with HostileReceiver("trickle", gap_s=1.0) as slow:
        slow_ids = [register(daemon, module_anvil, slow.url(f"/c{i}")) for i in range(3)]
        module_anvil.mine(3)
        wait_for(lambda: slow.requests >= 1, 30, what="the first slow attempt")
        sid = register(daemon, module_anvil, good.url("/commit"))
        module_anvil.mine(3)
        # A slow attempt holds one worker (max_per_destination = 1); the other is free.
        wait_for(
            lambda: any(e.get("settlement_id") == sid for e in good.effects("/commit")),
            20,
            what="the other caller's commit, while the slow receiver holds a worker",
        )

        def all_dead() -> list[dict[str, Any]] | None:
            rows = [r for s in slow_ids for r in commit_rows(daemon, s)]
            return rows if len(rows) == 3 and all(r["state"] == "dead" for r in rows) else None

        rows = wait_for(all_dead, 90, what="every slow commit dead at the attempt cap")
        assert all(r["attempts"] == DELIVERY["max_attempts"] for r in rows), rows
        assert all("deadline" in (r["last_error"] or "") for r in rows), rows
        assert slow.requests <= 3 * DELIVERY["max_attempts"], slow.requests
