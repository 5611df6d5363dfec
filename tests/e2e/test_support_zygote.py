"""Daemons forked from the zygote (tests/support/zygote.py) behave as ``python -m watcher.cli
run`` started on its own: the same exit code and message for a bad config, ``-9`` after
SIGKILL, 0 after SIGTERM, SIGPIPE ignored as by a fresh interpreter, their output in their own
log, and nothing left behind."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.anvil import ROOT, Anvil, free_port
from tests.support.daemon import Daemon, run_cli, subprocess_env, wait_for
from tests.support.zygote import Zygote, ZygoteProcess


def test_a_bad_config_exits_78_with_the_same_message_as_a_plain_process(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[store]\nurl = "sqlite:///x.db"\n[api]\nlisten = "nowhere"\n')
    args = ["run", "--config", str(config)]
    env = subprocess_env()
    plain = subprocess.run(
        [sys.executable, "-m", "watcher.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    zygote = Zygote.get(env)
    assert zygote is not None, "the zygote is off or could not fork safely"
    log = tmp_path / "forked.log"
    forked = zygote.spawn(args, env, ROOT, log)
    assert forked.wait(timeout=60) == plain.returncode == 78, plain.stderr
    assert log.read_text().strip() == plain.stderr.strip()


def _ignored_signals(pid: int) -> set[int]:
    """The signals process ``pid`` ignores (``SigIgn`` of /proc/PID/status)."""
    line = next(
        x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("SigIgn:")
    )
    mask = int(line.split()[1], 16)
    return {n for n in range(1, 65) if mask & (1 << (n - 1))}


def test_sigkill_and_sigterm_are_seen_as_by_popen(tmp_path: Path, anvil: Anvil) -> None:
    daemon = Daemon(tmp_path / "d", anvil.url)
    try:
        if not isinstance(daemon.proc, ZygoteProcess):
            pytest.skip("FINALITY_TEST_ZYGOTE=0: plain subprocesses")
        ignored = _ignored_signals(daemon.proc.pid)
        # As a fresh interpreter: a write to a closed socket (an SSE client gone) raises
        # instead of killing the daemon.
        assert signal.SIGPIPE in ignored and signal.SIGXFSZ in ignored, ignored
        assert daemon.terminate(timeout=30) == 0
        assert "stopped after" in daemon.log()
        daemon.start()
        pid = daemon.proc.pid
        daemon.kill9()
        assert daemon.proc.returncode == -signal.SIGKILL
        assert not Path(f"/proc/{pid}").exists(), "reaped, not left running or a zombie"
    finally:
        daemon.close()


def test_a_forked_cli_command_exits_and_prints_as_a_plain_process(tmp_path: Path) -> None:
    """``run_cli`` forks CLI commands from the zygote: the same exit code, stdout and stderr
    as ``python -m watcher.cli`` started on its own (a refusal on stderr, a verdict on
    stdout, a usage error)."""
    if Zygote.get(subprocess_env()) is None:
        pytest.skip("FINALITY_TEST_ZYGOTE=0: plain subprocesses")
    receipt = tmp_path / "receipt.json"
    receipt.write_text('{"kind": "settlement_finality_receipt"}')
    api = f"http://127.0.0.1:{free_port()}"
    for args in (("verify", str(receipt)), ("status", "0x12", "--api", api), ("nope",)):
        forked = run_cli(*args)
        plain = run_cli(*args, fresh=True)
        assert forked.returncode == plain.returncode != 0, (args, plain.stderr)
        assert (forked.stdout, forked.stderr) == (plain.stdout, plain.stderr), args
        assert plain.stdout + plain.stderr, args


def test_test_processes_share_one_zygote_and_their_children_end_with_them(
    tmp_path: Path, anvil: Anvil
) -> None:
    """Every test process of a run connects to the same zygote (its imports are paid once,
    not once per pytest-xdist worker); when one test process goes away, the daemons it
    started end with it, while the zygote goes on serving the others."""
    env = subprocess_env()
    if Zygote.get(env) is None:
        pytest.skip("FINALITY_TEST_ZYGOTE=0: plain subprocesses")
    other = Zygote(env)  # a second test process's connection
    assert other.proc is None, "a second zygote was started"
    config = Daemon(tmp_path / "d", anvil.url, start=False).config_path
    orphan = other.spawn(["run", "--config", str(config)], env, ROOT, tmp_path / "orphan.log")
    assert orphan.poll() is None
    assert other.sock is not None
    other.sock.shutdown(2)  # the test process is gone
    other.sock.close()
    wait_for(lambda: not Path(f"/proc/{orphan.pid}").exists(), 30, what="the orphan ended")
    forked = run_cli("nope")
    assert forked.returncode == 64, forked.stderr  # a usage error, served all the same
