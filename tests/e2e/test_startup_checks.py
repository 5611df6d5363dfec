"""What ``finality run`` checks before it starts, with real processes: one daemon per SQLite
store (a second exits 78 naming the holder), the API port bound before anything is
announced or recorded (a busy one exits 78 naming it, the signer list untouched), and the
configuration (signing key, the postgres extra) checked before the store is created."""

from __future__ import annotations

import contextlib
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.anvil import ROOT, Anvil
from tests.support.daemon import Daemon, subprocess_env

EX_CONFIG = 78


@pytest.fixture(scope="module")
def anvil(module_anvil: Anvil) -> Anvil:
    return module_anvil


def exit_of(daemon: Daemon, timeout: float = 60.0) -> tuple[int, str]:
    """Spawn the daemon's process and wait for it to end: (exit code, the log's last line)."""
    proc = daemon.spawn()
    code = proc.wait(timeout=timeout)
    lines = daemon.log().strip().splitlines()
    return code, lines[-1] if lines else ""


def signing(tmp_path: Path, name: str) -> str:
    """A ``[signing]`` table with a development key of its own (one per daemon)."""
    return f'\n[signing]\ndev_key_file = "{tmp_path / name}"\n'


@contextlib.contextmanager
def held_port() -> Iterator[int]:
    """A loopback port another process's socket listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def beside(first: Daemon, tmp_path: Path, anvil: Anvil) -> Daemon:
    """A second daemon, not started, on ``first``'s store with a signing key of its own."""
    return Daemon(
        tmp_path / "b",
        anvil.url,
        start=False,
        store_url=first.store_url,
        extra_config=signing(tmp_path, "key-b"),
    )


def listen_on(daemon: Daemon, port: int) -> None:
    """Point ``daemon``'s ``[api] listen`` at ``port``."""
    text = daemon.config_path.read_text()
    daemon.config_path.write_text(text.replace(f"127.0.0.1:{daemon.port}", f"127.0.0.1:{port}"))


def current_signers(db: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT address FROM signers WHERE retired_at IS NULL").fetchall()
    return [r[0] for r in rows]


def test_a_second_daemon_on_one_sqlite_store_exits_78_naming_the_holder(
    anvil: Anvil, tmp_path: Path
) -> None:
    first = Daemon(tmp_path / "a", anvil.url, extra_config=signing(tmp_path, "key-a"))
    try:
        second = beside(first, tmp_path, anvil)
        code, last = exit_of(second)
        assert code == EX_CONFIG, second.log_tail()
        assert "in use by another finality daemon" in last, last
        assert f"pid {first.proc.pid if first.proc else '?'}" in last
        assert f"on host {socket.gethostname()}" in last, last
        assert first.get("/healthz").status_code == 200  # the first one is untouched
        before = [s["address"] for s in first.get("/v1/signers").json() if s["current"]]
        assert len(before) == 1
        assert current_signers(first.db_path) == before  # the refused one never got in
        assert first.terminate() == 0
        second.start()  # the lock went with the first daemon
        now = [s["address"] for s in second.get("/v1/signers").json() if s["current"]]
        assert now != before
        second.kill9()
        second.start()  # kill -9 leaves no stale lock
    finally:
        first.close()
        second.close()


def test_a_busy_api_port_exits_78_naming_it_before_anything_is_announced_or_recorded(
    anvil: Anvil, tmp_path: Path
) -> None:
    running = Daemon(tmp_path / "a", anvil.url, extra_config=signing(tmp_path, "key-a"))
    try:
        running.terminate()
        signer = current_signers(running.db_path)
        with held_port() as port:
            blocked = beside(running, tmp_path, anvil)
            listen_on(blocked, port)
            code, last = exit_of(blocked)
        assert code == EX_CONFIG, blocked.log_tail()
        assert f"127.0.0.1:{port}" in last and "already in use" in last, last
        assert "API on" not in blocked.log()
        assert current_signers(running.db_path) == signer  # its key was never made current
    finally:
        running.close()


def test_a_busy_port_on_a_shared_store_leaves_the_running_instance_s_key_current(
    anvil: Anvil, tmp_path: Path, pg_url: str
) -> None:
    first = Daemon(
        tmp_path / "a", anvil.url, store_url=pg_url, extra_config=signing(tmp_path, "key-a")
    )
    try:
        [signer] = [s["address"] for s in first.get("/v1/signers").json() if s["current"]]
        second = beside(first, tmp_path, anvil)
        listen_on(second, first.port)
        code, last = exit_of(second)
        assert code == EX_CONFIG, second.log_tail()
        assert str(first.port) in last, last
        listed = first.get("/v1/signers").json()
        assert [s["address"] for s in listed if s["current"]] == [signer]
        assert len(listed) == 1, listed  # the failed start's key was never recorded
    finally:
        first.close()


def test_without_a_signing_key_nothing_is_created(anvil: Anvil, tmp_path: Path) -> None:
    daemon = Daemon(tmp_path, anvil.url, start=False, chain_id=1)
    try:
        code, last = exit_of(daemon)
        assert code == EX_CONFIG and "signing" in last, daemon.log_tail()
        assert not daemon.db_path.exists()
        assert not Path(f"{daemon.db_path}.lock").exists()
    finally:
        daemon.close()


def test_a_postgresql_store_without_the_driver_names_the_extra(
    anvil: Anvil, tmp_path: Path
) -> None:
    daemon = Daemon(
        tmp_path, anvil.url, start=False, store_url="postgresql://nobody@127.0.0.1:9/none"
    )
    # The driver is made unimportable in this process, as on an install without the extra.
    program = (
        "import sys; sys.modules['psycopg'] = None; "
        "from watcher.cli.main import main; sys.exit(main())"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, "run", "--config", str(daemon.config_path)],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    daemon.close()
    assert done.returncode == EX_CONFIG, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "postgres extra" in last and "finality-watcher[postgres]" in last, last
    assert "Traceback" not in done.stderr
