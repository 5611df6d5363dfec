"""Daemon processes forked from a pre-imported Python, so a start does not pay the imports.

A ``finality run`` process spends about 1.6 s of CPU importing web3 (which always imports
eth-account, eth-keyfile and py_ecc's BLS code), FastAPI, SQLAlchemy and the rest before it
reads its config; the suite starts daemons about a hundred times, on two cores. The zygote
is one plain Python process per test process that imports the daemon's modules once
(importing starts no thread) and then forks a child per start. Each child is a real,
separate daemon process: it sets the environment and working directory it was given, sends
stdout and stderr to its log, restores the default signal handlers and runs
``python -m watcher.cli ARGS`` exactly as the interpreter would (``runpy``, same exit code).
Only the imports were done before the fork.

The child is the zygote's, not the test's: :class:`ZygoteProcess` offers the part of
:class:`subprocess.Popen` the tests use (``pid``, ``poll``, ``wait``, ``send_signal``,
``kill``, ``returncode``, with ``-N`` for a death by signal N), from the exit statuses the
zygote reports. ``FINALITY_TEST_ZYGOTE=0`` starts every daemon as a plain subprocess instead.

One zygote serves the whole run: its imports cost about 7 s of CPU (measured at load 13), and
each of pytest-xdist's workers would otherwise pay them. The first test process that needs it
starts it (under a lock file, so only one does); every test process talks to it over its own
connection to a Unix socket. When a test process goes away (its connection closes) the
zygote kills that process's children; it exits, killing the rest, when the run's main pytest
process (xdist's controller, or the one test process without xdist) does.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PRELOAD = (
    "watcher.cli.main",
    "watcher.logs",
    "watcher.config.loading",
    "watcher.api.server",
    "watcher.app.build",
    "watcher.receipts.signer",
    "watcher.store",
    "chains.errors",
    "uvicorn",
    # imported on the way to serving, not by the modules above: uvicorn's loop and
    # protocol modules, anyio's backend, the keccak backend, pydantic.v1 (FastAPI's
    # compatibility layer) and alembic's migration machinery
    "uvicorn.loops.uvloop",
    "uvicorn.protocols.http.httptools_impl",
    "uvicorn.protocols.websockets.auto",
    "anyio._backends._asyncio",
    "eth_hash.backends.pycryptodome",
    "pydantic.v1",
    "alembic.command",
    "alembic.runtime.migration",
    "alembic.script",
)
"""What ``finality run`` imports before it serves (watcher/cli/daemon.py and what it
imports lazily on the way: about 0.1 s of a start's CPU otherwise)."""


def enabled() -> bool:
    """Daemons start from the zygote unless ``FINALITY_TEST_ZYGOTE=0``."""
    return os.environ.get("FINALITY_TEST_ZYGOTE", "1") != "0"


# -- the zygote process --------------------------------------------------------------------


def _child(request: Mapping[str, Any]) -> None:
    """In the forked child: become ``python -m watcher.cli ARGS``; never returns."""
    import runpy

    code = 1
    try:
        # The dispositions a fresh interpreter starts with (SIGPIPE and SIGXFSZ ignored, so
        # a write to a closed socket raises instead of killing the process; SIGINT raises
        # KeyboardInterrupt), whatever the zygote set.
        for sig in (signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.set_wakeup_fd(-1)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        log = os.open(request["log"], flags, 0o644)
        # A CLI command's stderr apart from its stdout (run_cli captures both, as Popen).
        err = os.open(request["stderr"], flags, 0o644) if request.get("stderr") else log
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(err, 2)
        os.closerange(3, 4096)  # the zygote's pipes and selector: not the daemon's
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own fds
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.argv = ["python -m watcher.cli", *request["args"]]
        try:
            runpy.run_module("watcher.cli", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _status(raw: int) -> int:
    """A wait status as Popen's returncode: the exit code, or ``-N`` for signal N."""
    if os.WIFSIGNALED(raw):
        return -os.WTERMSIG(raw)
    return os.waitstatus_to_exitcode(raw)


def serve(path: str, owner: int) -> None:
    """The zygote's loop: listen on the Unix socket ``path``; on each connection, a JSON
    request per line → fork, answered ``started PID`` and, later, ``exited PID CODE`` for
    each of that connection's children. Says ``ready`` on stdout once it listens; exits when
    process ``owner`` (the run's main pytest process) does."""
    import gc
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    # Everything imported so far lives as long as every child: moved out of the collector's
    # reach before the first fork. Otherwise each child's first full collection (the daemon
    # runs one at start-up, before its own gc.freeze) walks every imported object and
    # writes to its header, copying each page it touches: about a quarter of a start's CPU.
    gc.collect()
    gc.freeze()
    # A thread started by an import would not survive the fork (its locks might): refuse.
    if threading.active_count() != 1:
        print("threads", flush=True)
        return
    try:
        owner_fd = os.pidfd_open(owner)
    except ProcessLookupError:
        return
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    parent_of: dict[int, socket.socket] = {}
    pending: dict[socket.socket, bytes] = {}
    selector = selectors.DefaultSelector()
    for fileobj in (listener, wake_r, owner_fd):
        selector.register(fileobj, selectors.EVENT_READ)

    def say(conn: socket.socket, line: str) -> None:
        if conn in pending:  # a closed connection's children are killed, not reported
            with contextlib.suppress(OSError):
                conn.sendall((line + "\n").encode())

    def reap() -> None:
        while parent_of:
            try:
                pid, raw = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = parent_of.pop(pid, None)
            if conn is not None:
                say(conn, f"exited {pid} {_status(raw)}")

    def drop(conn: socket.socket) -> None:
        """A test process went away: so do the children it started."""
        selector.unregister(conn)
        del pending[conn]
        conn.close()
        for pid, parent in parent_of.items():
            if parent is conn:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    print("ready", flush=True)
    try:
        while True:
            for key, _ in selector.select():
                if key.fileobj is owner_fd:
                    return
                if key.fileobj is wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 4096)
                    continue
                if key.fileobj is listener:
                    conn, _ = listener.accept()
                    pending[conn] = b""
                    selector.register(conn, selectors.EVENT_READ)
                    continue
                conn = key.fileobj  # type: ignore[assignment]
                chunk = conn.recv(65536)
                if not chunk:
                    drop(conn)
                    continue
                pending[conn] += chunk
                while b"\n" in pending[conn]:
                    line, pending[conn] = pending[conn].split(b"\n", 1)
                    pid = os.fork()
                    if pid == 0:
                        _child(json.loads(line))
                    parent_of[pid] = conn
                    say(conn, f"started {pid}")
            reap()
    finally:
        for pid in parent_of:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for name in (path, path + ".lock"):  # the run is over: no test process connects
            with contextlib.suppress(OSError):
                os.unlink(name)


# -- the test side ---------------------------------------------------------------------------


def _run_owner() -> int:
    """The run's main pytest process: xdist's controller (a worker's parent), or this one."""
    return os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()


def _socket_path(owner: int, python_path: str) -> str:
    """Where the zygote of this run (and this PYTHONPATH, this interpreter) listens."""
    key = hashlib.sha256(f"{sys.executable}\0{python_path}".encode()).hexdigest()[:10]
    return os.path.join(tempfile.gettempdir(), f"finality-zygote-{owner}-{key}.sock")


class Zygote:
    """The test process's connection to the run's zygote (started on first use by whichever
    test process needs it first, one per run)."""

    _lock = threading.Lock()
    _instance: Zygote | None = None

    def __init__(self, env: Mapping[str, str]) -> None:
        self.python_path = env.get("PYTHONPATH", "")
        self._cond = threading.Condition()
        self._started: list[int] = []
        self._exited: dict[int, int] = {}
        self._spawn_lock = threading.Lock()
        self.alive = True
        """False once the connection closed: the zygote is gone, and so are its children."""
        self.proc: subprocess.Popen[str] | None = None
        """The zygote, if this test process started it."""
        self.sock = self._connect(env)
        self.usable = self.sock is not None
        """False if its imports started a thread (then daemons start as subprocesses)."""
        if self.sock is not None:
            self._reader = threading.Thread(target=self._read, name="zygote", daemon=True)
            self._reader.start()

    def _connect(self, env: Mapping[str, str]) -> socket.socket | None:
        """Connect to the run's zygote, starting it first if no test process has."""
        owner = _run_owner()
        path = _socket_path(owner, self.python_path)
        with open(path + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(path)
                return sock
            except OSError:
                pass
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # a zygote of an earlier run with the same owner pid
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    f"from tests.support.zygote import serve; serve({path!r}, {owner})",
                ],
                cwd=ROOT,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert self.proc.stdout is not None
            said = self.proc.stdout.readline().strip()
            self.proc.stdout.close()
            if said != "ready":
                sock.close()
                return None
            sock.connect(path)
            return sock

    @classmethod
    def get(cls, env: Mapping[str, str]) -> Zygote | None:
        """The zygote, if it can start a daemon with ``env`` (same PYTHONPATH as its own:
        the modules it imported came from there); None to start a plain subprocess."""
        if not enabled():
            return None
        with cls._lock:
            zygote = cls._instance
            if zygote is None or not zygote.alive:
                zygote = cls._instance = Zygote(env)
        same_path = env.get("PYTHONPATH", "") == zygote.python_path
        return zygote if zygote.usable and same_path else None

    def _read(self) -> None:
        assert self.sock is not None
        with self.sock.makefile("r", encoding="utf-8") as lines:
            for line in lines:
                kind, *rest = line.split()
                with self._cond:
                    if kind == "started":
                        self._started.append(int(rest[0]))
                    elif kind == "exited":
                        self._exited[int(rest[0])] = int(rest[1])
                    self._cond.notify_all()
        with self._cond:  # the zygote is gone: so are its children (it killed them)
            self.alive = False
            self._cond.notify_all()

    def spawn(
        self,
        args: Sequence[str],
        env: Mapping[str, str],
        cwd: Path,
        log: Path,
        stderr: Path | None = None,
    ) -> ZygoteProcess:
        """Fork ``python -m watcher.cli ARGS`` with ``env`` in ``cwd``, output to ``log``
        (stderr to ``stderr`` instead, if given)."""
        request = {
            "args": list(args),
            "env": dict(env),
            "cwd": str(cwd),
            "log": str(log),
            "stderr": str(stderr) if stderr is not None else None,
        }
        with self._spawn_lock:
            assert self.sock is not None
            self.sock.sendall((json.dumps(request) + "\n").encode())
            with self._cond:
                if not self._cond.wait_for(lambda: self._started, 60):
                    raise RuntimeError("the daemon zygote did not fork")
                pid = self._started.pop(0)
        return ZygoteProcess(self, pid)

    def returncode_of(self, pid: int) -> int | None:
        with self._cond:
            return self._exited.get(pid)

    def wait_for_exit(self, pid: int, timeout: float | None) -> int | None:
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exited or not self.alive, timeout)
            return self._exited.get(pid)


class ZygoteProcess:
    """A daemon forked by the zygote, with the part of Popen's interface the tests use."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote = zygote
        self.pid = pid
        self.args = ["python", "-m", "watcher.cli"]
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code once it exited (``-N``: killed by signal N), else None."""
        if self.returncode is None:
            self.returncode = self.zygote.returncode_of(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the exit; raises :class:`subprocess.TimeoutExpired` like Popen."""
        if self.poll() is not None:
            assert self.returncode is not None
            return self.returncode
        code = self.zygote.wait_for_exit(self.pid, timeout)
        if code is None:
            if not self.zygote.alive:
                raise RuntimeError(f"the zygote of daemon {self.pid} died")
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        self.returncode = code
        return code

    def send_signal(self, sig: int) -> None:
        """Signal the daemon (nothing if it already exited, as Popen does)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
