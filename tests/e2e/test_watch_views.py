"""What a waiting settlement says, through the API and ``finality watch``, against a real
daemon following a real anvil under the ``finalized`` rule.

anvil runs with ``--no-mining`` (the test mines) and ``--slots-in-an-epoch 1``, so its
``finalized`` block is the head minus 2: a tx included in block B is final once the head is
B + 2. On the way the view says what the rule waits for (the finalized block reaching B, not
a depth out of the chain's N), its directive's times are those of the moment it answers,
and ``finality watch`` prints each thing that happens: inclusion, every new head, a reorg
that removes the tx, its inclusion again, a revert. ``--wait-timeout`` stops only the
command; the old ``--timeout`` still sets the settlement's deadline, saying so.
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import unknown_hash
from tests.support.anvil import ROOT, Anvil
from tests.support.daemon import Daemon, subprocess_env, wait_for
from tests.support.zygote import Zygote, ZygoteProcess

pytestmark = pytest.mark.anvil

LINE_S = 30.0
"""How long a watch line may take to appear (a loaded 2-core machine)."""


@pytest.fixture(scope="module")
def anvil() -> Iterator[Anvil]:
    node = Anvil("--no-mining", "--slots-in-an-epoch", "1")
    node.mine(5)
    yield node
    node.stop()


IDLE_POLL_S = 3600.0
"""The daemon's interval poll: an hour. Blocks come only when a test mines, and each new head
(a reorg's too) wakes the poll over the WebSocket subscription, so no interval poll is needed;
polling anvil every 0.2 s through the minutes the file takes cost more CPU than the tests."""


@pytest.fixture(scope="module")
def daemon(anvil: Anvil, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    daemon = Daemon(
        tmp_path_factory.mktemp("views"),
        anvil.url,
        finality="finalized",
        confirmations=50,
        heads="ws",
        heads_url=f"ws://127.0.0.1:{anvil.port}",
        poll_interval_s=IDLE_POLL_S,
    )
    wait_for(lambda: daemon.chain_info()["heads"]["subscribed"], LINE_S, what="subscribed")
    yield daemon
    daemon.close()


def recorded(daemon: Daemon, anvil: Anvil) -> None:
    """Wait until the daemon has recorded the node's head."""
    head = anvil.head()

    def caught_up() -> bool:
        chains = daemon.get("/v1/chains").json()
        return any(c.get("head_number") == head for c in chains)

    wait_for(caught_up, LINE_S, interval=0.05, what=f"the daemon at head {head}")


def test_a_waiting_view_says_what_the_rule_waits_for_and_its_times_now(
    daemon: Daemon, anvil: Anvil
) -> None:
    tx = anvil.send()
    view = daemon.register(tx)  # watched: the daemon asks for the finalized tag from now on
    anvil.mine()
    block = anvil.head()
    recorded(daemon, anvil)
    sid = view["settlement_id"]

    def included() -> dict[str, Any] | None:
        current = daemon.settlement(sid)
        return current if current["block_number"] == block else None

    view = wait_for(included, LINE_S, interval=0.05, what="the inclusion")
    assert view["verdict"] == "AWAITING_FINALITY"
    assert view["waiting_for"] == f"the finalized block to reach {block}; finalized now {block - 2}"
    [listed] = [
        v for v in daemon.get("/v1/settlements").json()["items"] if v["settlement_id"] == sid
    ]
    assert listed["waiting_for"] == view["waiting_for"]  # a page reads the chains once
    status = daemon.cli("status", tx)
    assert status.returncode == 0, status.stderr
    assert f"waiting for the finalized block to reach {block}; finalized now {block - 2}" in (
        status.stdout
    )
    assert "/50 confirmations" not in status.stdout

    allowed = view["deadline"] - view["initiated_at"]

    def times(current: dict[str, Any]) -> tuple[int, int]:
        found = re.search(r"\((\d+) ms elapsed, (\d+) ms left\)", current["directive"])
        assert found, current["directive"]
        return int(found[1]), int(found[2])

    def moved() -> bool:
        elapsed, left = times(daemon.settlement(sid))
        assert elapsed + left == allowed
        return elapsed > 0

    wait_for(moved, LINE_S, interval=0.05, what="the directive's time to move")


class Watch:
    """``finality watch`` as a process; its stderr lines collected as they come.

    Forked from the daemons' zygote (its imports done once) when there is one: its stderr is
    a FIFO read line by line as the command writes it, its stdout a file read at the end.
    Otherwise a plain ``python -m watcher.cli`` with pipes."""

    def __init__(self, daemon: Daemon, where: Path, *args: str) -> None:
        argv = ["watch", *args, "--api", daemon.url]
        env = subprocess_env()
        self._queue: queue.Queue[str] = queue.Queue()
        self.lines: list[str] = []
        self.stdout = where / "watch.stdout"
        zygote = Zygote.get(env)
        self.proc: subprocess.Popen[str] | ZygoteProcess
        if zygote is not None:
            fifo = where / "watch.stderr"
            os.mkfifo(fifo)
            threading.Thread(target=self._read_fifo, args=(fifo,), daemon=True).start()
            self.proc = zygote.spawn(argv, env, ROOT, self.stdout, stderr=fifo)
            return
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "watcher.cli", *argv],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        threading.Thread(target=self._read, args=(self.proc.stderr,), daemon=True).start()

    def _read_fifo(self, fifo: Path) -> None:
        with fifo.open(encoding="utf-8") as stream:  # returns once the command opens it
            self._read(stream)

    def _read(self, stream: Iterator[str]) -> None:
        for line in stream:
            self._queue.put(line)

    def expect(self, pattern: str) -> str:
        """The next line matching ``pattern`` (the lines before it are kept in ``lines``)."""
        while True:
            try:
                line = self._queue.get(timeout=LINE_S).rstrip("\n")
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r}; got {self.lines}") from None
            self.lines.append(line)
            if re.search(pattern, line):
                return line

    def finish(self) -> tuple[int, str]:
        """The exit code and stdout (the process killed if it takes longer than a line may)."""
        if isinstance(self.proc, subprocess.Popen):
            out, _ = self.proc.communicate(timeout=LINE_S)
            return self.proc.returncode, out
        try:
            code = self.proc.wait(timeout=LINE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        return code, self.stdout.read_text(encoding="utf-8")


def test_watch_prints_inclusion_each_head_a_reorg_and_inclusion_again(
    daemon: Daemon, anvil: Anvil, tmp_path: Path
) -> None:
    recorded(daemon, anvil)
    tx = anvil.send()
    raw = anvil.raw_tx(tx)
    watch = Watch(daemon, tmp_path, tx, "--wait-timeout", "120")
    watch.expect("waiting for inclusion in a block")
    anvil.mine()
    block = anvil.head()
    watch.expect(rf"included in block {block} ")
    anvil.reorg(1)  # anvil erases the tx of a replaced block (it is not back in the pool)
    watch.expect("a reorg removed the tx from its block: waiting for inclusion again")
    anvil.rpc("eth_sendRawTransaction", raw)
    anvil.mine()
    again = anvil.head()
    watch.expect(rf"included in block {again} \(0x[0-9a-f]{{4}}…[0-9a-f]{{4}}\), depth 1; ")
    anvil.mine()
    watch.expect(rf", depth 2; waiting for the finalized block to reach {again}; finalized now")
    anvil.mine()
    code, out = watch.finish()
    assert code == 0, (out, watch.lines)
    assert out.startswith("FINALITY_CONFIRMED: COMMIT")


def test_watch_says_a_revert_when_it_is_seen(daemon: Daemon, anvil: Anvil, tmp_path: Path) -> None:
    recorded(daemon, anvil)
    tx = anvil.send_revert()
    watch = Watch(daemon, tmp_path, tx, "--wait-timeout", "120")
    watch.expect("waiting for inclusion")
    anvil.mine()
    watch.expect(r"reverted in block \d+ \(receipt status 0\): it will not settle")
    anvil.mine(2)
    code, out = watch.finish()
    assert code == 1 and out.startswith("SETTLEMENT_FAILED"), (out, watch.lines)


def test_wait_timeout_stops_the_command_and_timeout_sets_the_deadline(daemon: Daemon) -> None:
    tx = unknown_hash(31)
    done = daemon.cli("watch", tx, "--wait-timeout", "0.5", "--json")
    assert done.returncode == 75, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    view = daemon.get(f"/v1/chains/local/txs/{tx}").json()
    assert view["verdict"] == "AWAITING_FINALITY"  # only the command stopped

    tx = unknown_hash(32)
    done = daemon.cli("watch", tx, "--timeout", "40", "--wait-timeout", "0.5")
    assert done.returncode == 75, (done.stdout, done.stderr)
    assert "--timeout is deprecated: it sets the settlement's deadline" in done.stderr
    assert "stopped waiting after 0.5 s (--wait-timeout)" in done.stdout
    view = daemon.get(f"/v1/chains/local/txs/{tx}").json()
    assert view["deadline"] - view["initiated_at"] == 40_000

    tx = unknown_hash(33)
    done = daemon.cli("watch", tx, "--settlement-timeout", "41", "--wait-timeout", "0.5")
    assert done.returncode == 75 and "deprecated" not in done.stderr
    view = daemon.get(f"/v1/chains/local/txs/{tx}").json()
    assert view["deadline"] - view["initiated_at"] == 41_000


def test_status_json_into_a_reader_that_stops_early_is_no_traceback(daemon: Daemon) -> None:
    tx = unknown_hash(34)
    state = {f"k{i:04}": i for i in range(5000)}  # 59 KB; indented, more than a pipe holds
    daemon.register(tx, dependent_state=state)
    proc = subprocess.Popen(
        [sys.executable, "-m", "watcher.cli", "status", tx, "--json", "--api", daemon.url],
        cwd=ROOT,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"{")  # a reader that takes one line, as head
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=LINE_S) == 141, stderr
    assert stderr == ""
