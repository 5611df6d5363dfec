"""Two agent processes hand a workflow off through the real daemon, bound to real anvil txs.

Agent A (a process using the client) begins ``charge`` bound to a settlement of a real tx
and dies (SIGKILL); agent B (another process) takes over once A's lease lapses, learns from
the watcher that ``charge`` is ``pending`` and then ``completed`` once the tx is final (the
finality receipt as evidence, checked offline), and completes the rest. A second A begins a
charge whose tx reverted and is frozen (SIGSTOP); B learns the charge ``failed`` (the
failure receipt) and never re-runs it; the frozen A, thawed (SIGCONT), gets 409 on every
write. Once on one daemon over SQLite, once on PostgreSQL with two daemons, A talking to
one and B to the other: the lease lives in the store.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.handoff_helpers import pg_daemon
from tests.support.anvil import ROOT, Anvil
from tests.support.daemon import Daemon, subprocess_env

LEASE_S = 2.0
"""Agent A's lease: short, so B takes over soon after A stops renewing."""
RECEIPT_OF = {"completed": "settlement_finality_receipt", "failed": "settlement_failure_receipt"}
"""The receipt recovery shows as evidence of each outcome."""


class Agent:
    """``python -m tests.support.workflow_agent ARGS`` as a process: JSON lines out, commands
    in (see that module)."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.workflow_agent", *args],
            cwd=ROOT,
            env=subprocess_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, out: Any) -> None:
        for text in out:
            self.lines.put(text)

    def line(self, timeout: float = 60.0) -> dict[str, Any]:
        """The agent's next JSON line (fails with its stderr if none comes)."""
        try:
            return dict(json.loads(self.lines.get(timeout=timeout)))
        except queue.Empty:
            self.proc.kill()
            assert self.proc.stderr is not None
            raise AssertionError(
                f"agent said nothing for {timeout} s: {self.proc.stderr.read()}"
            ) from None

    def signal(self, sig: signal.Signals) -> None:
        os.kill(self.proc.pid, sig)

    def tell(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def handoffs(anvil: Anvil, api_a: str, api_b: str) -> None:
    """Both handoffs (see the module doc): A's requests go to ``api_a``, B's to ``api_b``."""
    agents: list[Agent] = []

    def agent(*args: str) -> Agent:
        agents.append(Agent(*args))
        return agents[-1]

    def hand_over(tx: str, stop: signal.Signals, outcome: str) -> tuple[Agent, str, Any]:
        """A begins a charge bound to ``tx`` and is stopped with ``stop``; B takes over,
        sees the charge pending, then (blocks mined) ``outcome``; returns (A, the workflow,
        B's last line)."""
        anvil.receipt(tx)
        a = agent("first", api_a, tx, str(LEASE_S))
        wid = a.line()["workflow_id"]
        a.signal(stop)
        b = agent("successor", api_b, wid, "10")
        taken = b.line()
        assert (taken["verdict"], taken["fencing_token"], taken["charge"]) == (
            "HANDOFF_SAFE",
            2,
            ["pending"],
        ), taken
        assert len(taken["receipts"]) == 4
        anvil.mine(3)
        learned = b.line(timeout=120)
        assert learned["seen"] == ["pending", outcome], learned
        assert learned["receipt_kind"] == RECEIPT_OF[outcome]
        assert learned["receipt_valid"] is True
        return a, wid, b.line()

    try:
        # A charge whose tx will be final: A killed outright; B finishes the work.
        _, w1, done = hand_over(anvil.send(), signal.SIGKILL, "completed")
        assert done["final"] == [
            ["charge", "completed"],
            ["ship", "completed"],
            ["notify", "completed"],
        ]
        assert done["holder"] == "agent-b"

        # A charge whose tx reverted: A frozen; B never re-runs it; A thawed writes nothing.
        a2, w2, left = hand_over(anvil.send_revert(), signal.SIGSTOP, "failed")
        assert left["final"] == [
            ["charge", "in_flight"],
            ["ship", "pending"],
            ["notify", "pending"],
        ]
        a2.signal(signal.SIGCONT)
        a2.tell("write")
        statuses = a2.line()["statuses"]
        assert statuses == [[409, "fencing_token: stale (current 2)"]] * 5, statuses

        # Each lapse was recorded once, whichever instance noticed it first.
        events = httpx.get(f"{api_b}/v1/events", params={"limit": 1000}).json()
        for wid in (w1, w2):
            # A's lease (token 1); B's own may have lapsed since it stopped renewing.
            kinds = [
                e["kind"]
                for e in events
                if e["settlement_id"] == wid and e["payload"]["fencing_token"] == 1
            ]
            assert kinds.count("workflow_lease_expired") == 1, kinds
            taken = [e for e in events if e["settlement_id"] == wid]
            assert [e["kind"] for e in taken].count("workflow_taken_over") == 1, taken
    finally:
        for each in agents:
            each.close()


def test_agents_hand_off_on_one_daemon_over_sqlite(
    module_anvil: Anvil, make_daemon: Callable[..., Daemon]
) -> None:
    daemon = make_daemon(module_anvil.url, poll_interval_s=0.1)
    handoffs(module_anvil, daemon.url, daemon.url)


def test_agents_hand_off_across_two_daemons_over_postgresql(
    module_anvil: Anvil, pg_url: str, tmp_path: Path
) -> None:
    daemons = [pg_daemon(tmp_path, module_anvil.url, pg_url, name) for name in ("d1", "d2")]
    try:
        for daemon in daemons:
            daemon.start()
        handoffs(module_anvil, daemons[0].url, daemons[1].url)
    finally:
        for daemon in daemons:
            daemon.close()


def test_a_daemon_killed_mid_workflow_loses_nothing(
    module_anvil: Anvil, make_daemon: Callable[..., Daemon]
) -> None:
    daemon = make_daemon(module_anvil.url)
    body = {"steps": ["charge", "ship"], "holder": "agent-a", "lease_s": 600}
    wf = daemon.post("/v1/workflows", json=body).json()
    wid = wf["workflow_id"]
    path = f"/v1/workflows/{wid}/steps/charge"
    assert daemon.post(f"{path}/begin", json={"fencing_token": 1, "operation": "x"}).is_success
    done = daemon.post(f"{path}/complete", json={"fencing_token": 1, "side_effects": {"a": 1}})
    assert done.is_success, done.text
    before = daemon.get(f"/v1/workflows/{wid}").json()
    daemon.kill9()
    daemon.start()
    after = daemon.get(f"/v1/workflows/{wid}").json()
    assert after["steps"] == before["steps"] and after["receipts"] == before["receipts"]
    assert after["fencing_token"] == 1 and after["lease_expires_at"] == wf["lease_expires_at"]
    stale = daemon.post(f"/v1/workflows/{wid}/lease", json={"fencing_token": 2})
    assert stale.status_code == 409
