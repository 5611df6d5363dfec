"""The finality daemon as a real process, for end-to-end tests.

:class:`Daemon` writes a TOML config (SQLite store in a temporary directory, the API on a free
loopback port, one chain ``local`` at a given anvil URL), starts
``python -m watcher.cli run --config FILE`` as a subprocess, and waits until ``/healthz``
answers 200. Nothing is mocked: tests talk HTTP to the process and read its SQLite file.
"""

from __future__ import annotations

import locale
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.support.anvil import ROOT, Anvil, free_port
from tests.support.zygote import Zygote, ZygoteProcess

CHAIN = "local"
CHAIN_ID = 31337
START_TIMEOUT_S = 60.0
"""Deadline for ``/healthz`` after a start: about 2 s idle, 12 s on a 2-core machine with four
busy loops beside it (measured), so only a daemon that cannot start runs into it."""
CLI_TIMEOUT_S = 30.0
HTTP_TIMEOUT_S = 30.0
"""Deadline of one request to the daemon: a fresh daemon's first POST builds the whole
OpenAPI document first (watcher/api/guards.py asks it which methods a path takes), 0.4-0.65 s
of CPU and 6 s of wall at load 13 (measured); at load 14 the kill loop's registrations ran
past the 10 s it had, on main too."""

POLL_INTERVAL_S = 0.2
"""The interval poll of a daemon that polls (its RPC is not an anvil of this process: a
proxy in between may not carry WebSocket, and a test of faults needs the poll path)."""

WOKEN_POLL_INTERVAL_S = 1.0
"""The interval poll of a daemon woken by its anvil's WebSocket ``newHeads``: only the
fallback for what no head announces (a head before the subscription was up, deadlines that
are a matter of time). Polling anvil every 0.2 s cost about 10 % of a core per idle daemon
on the 2-core test machine, every 1 s about 3 % (measured)."""

_T = TypeVar("_T")

DaemonProcess = subprocess.Popen[bytes] | ZygoteProcess
"""A running daemon: forked by the zygote, or a plain subprocess."""


def wait_for(
    check: Callable[[], _T | None],
    timeout: float = 10.0,
    interval: float = 0.1,
    what: str = "condition",
) -> _T:
    """Call ``check`` until it returns something truthy; return it, or fail after ``timeout``.

    Every 0.1 s by default: most checks are an HTTP request the daemon answers (or a store
    query), so a test that waits seconds pays for each one in both processes; a finer
    ``interval`` is for a check whose timing is the subject."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        result = check()
        if result:
            return result
        last = result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def toml_value(value: Any) -> str:
    """A Python value as a TOML literal (the few types a config uses)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def config_text(store_url: str, listen: str, chain: Mapping[str, Any]) -> str:
    """A whole config file: ``[store]``, ``[api]`` and one ``[[chains]]`` table."""
    lines = [
        "[store]",
        f"url = {toml_value(store_url)}",
        "",
        "[api]",
        f"listen = {toml_value(listen)}",
        "",
        "[[chains]]",
        *(f"{key} = {toml_value(value)}" for key, value in chain.items()),
    ]
    return "\n".join(lines) + "\n"


def subprocess_env() -> dict[str, str]:
    """The environment for daemon and CLI processes: no developer settings leak in."""
    env = dict(os.environ)
    for name in ("FINALITY_CONFIG", "FINALITY_API", "ETH_RPC_URL"):
        env.pop(name, None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_cli(
    *args: str,
    timeout: float = CLI_TIMEOUT_S,
    cwd: Path = ROOT,
    fresh: bool = False,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m watcher.cli ARGS`` as a process (in ``cwd``); output captured as text.

    The process is forked from the zygote (its imports done once: a command costs about
    0.1 s of CPU instead of 1.5 s), a real process all the same, with its own exit code,
    stdout and stderr. ``fresh=True`` (or ``FINALITY_TEST_ZYGOTE=0``) starts a plain
    interpreter instead, for the tests that keep one per CLI concern. ``env``: variables
    added to the test's environment."""
    full = {**subprocess_env(), **(env or {})}
    zygote = None if fresh else Zygote.get(full)
    if zygote is not None:
        return _forked_cli(zygote, list(args), full, cwd, timeout)
    return subprocess.run(
        [sys.executable, "-m", "watcher.cli", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _forked_cli(
    zygote: Zygote, args: list[str], env: dict[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """:func:`run_cli` through the zygote: output through files, read back as Popen would
    (the locale's encoding, universal newlines); killed on ``timeout`` as by
    :func:`subprocess.run`."""
    with tempfile.TemporaryDirectory(prefix="finality-cli-") as where:
        out, err = Path(where) / "stdout", Path(where) / "stderr"
        proc = zygote.spawn(args, env, cwd, out, stderr=err)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            raise
        encoding = locale.getpreferredencoding(False)
        stdout = out.read_text(encoding=encoding) if out.exists() else ""
        stderr = err.read_text(encoding=encoding) if err.exists() else ""
    return subprocess.CompletedProcess(["python", "-m", "watcher.cli", *args], code, stdout, stderr)


def woken_by_heads(url: str, overrides: Mapping[str, Any]) -> bool:
    """Whether a test daemon on ``url`` follows WebSocket heads by default: ``url`` is an
    anvil of this process (not a proxy), and the test chose neither how heads are noticed
    nor its endpoints nor its poll interval."""
    chosen = {"heads", "heads_url", "rpc", "poll_interval_s"} & overrides.keys()
    return url in Anvil.serving and url.startswith("http://") and not chosen


class Daemon:
    """One ``finality run`` process on a free port with its own SQLite store (or the
    ``store_url`` given, e.g. a PostgreSQL schema shared by several daemons; append more
    TOML tables with ``extra_config``).

    ``chain_overrides`` replace or add keys of the ``[[chains]]`` table (``chain_id=1``,
    ``confirmations=10``, ``poll_interval_s=0.1``...). ``start=False`` only writes the config.

    Pointed straight at an anvil of this process (:attr:`Anvil.serving`) with none of
    ``heads``, ``rpc`` and ``poll_interval_s`` given, the daemon is woken by the anvil's
    WebSocket ``newHeads`` and polls only every :data:`WOKEN_POLL_INTERVAL_S` (CPU, not
    latency: each head wakes a poll at once); otherwise it polls every
    :data:`POLL_INTERVAL_S`. A test of the poll path or of pacing sets ``heads="poll"`` or
    its ``poll_interval_s``.
    """

    def __init__(
        self,
        tmp_path: Path,
        anvil_url: str,
        *,
        start: bool = True,
        store_url: str | None = None,
        extra_config: str = "",
        **chain_overrides: Any,
    ) -> None:
        self.dir = Path(tmp_path)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.db_path = self.dir / "finality.db"
        self.log_path = self.dir / "daemon.log"
        self.config_path = self.dir / "finality.toml"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.chain: dict[str, Any] = {
            "name": CHAIN,
            "chain_id": CHAIN_ID,
            "rpc": [anvil_url],
            "confirmations": 3,
            "poll_interval_s": POLL_INTERVAL_S,
        }
        if woken_by_heads(anvil_url, chain_overrides):
            self.chain["heads"] = "ws"
            self.chain["heads_url"] = "ws://" + anvil_url.removeprefix("http://")
            self.chain["poll_interval_s"] = WOKEN_POLL_INTERVAL_S
        self.chain.update(chain_overrides)
        self.store_url = store_url or f"sqlite:///{self.db_path}"
        """The store: the default SQLite file, or a shared PostgreSQL URL (several daemons)."""
        self.config_path.write_text(
            config_text(self.store_url, f"127.0.0.1:{self.port}", self.chain) + extra_config
        )
        self.proc: DaemonProcess | None = None
        self.http = httpx.Client(base_url=self.url, timeout=HTTP_TIMEOUT_S)
        self._pg: Any = None
        """The kept PostgreSQL connection of :meth:`query` (opened on first use)."""
        self.starts = 0
        if start:
            self.start()

    # -- life cycle ----------------------------------------------------------------------

    def spawn(self) -> DaemonProcess:
        """Start the process (appending to the log) without waiting for it to be ready:
        forked from the zygote (tests/support/zygote.py: the imports are done once), or a
        plain ``python -m watcher.cli run`` subprocess with ``FINALITY_TEST_ZYGOTE=0``."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("the daemon is already running")
        self.starts += 1
        args = ["run", "--config", str(self.config_path)]
        env = subprocess_env()
        with self.log_path.open("ab") as log:
            log.write(f"--- start #{self.starts} ---\n".encode())
            log.flush()
            zygote = Zygote.get(env)
            if zygote is not None:
                self.proc = zygote.spawn(args, env, ROOT, self.log_path)
                return self.proc
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "watcher.cli", *args],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        return self.proc

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start the process and wait until ``/healthz`` answers 200."""
        proc = self.spawn()
        deadline = time.monotonic() + timeout
        last = "no answer"
        while True:
            code = proc.poll()
            if code is not None:
                raise RuntimeError(
                    f"the daemon exited with {code} before it was healthy; log:\n{self.log_tail()}"
                )
            try:
                answer = self.http.get("/healthz", timeout=2.0)
                if answer.status_code == 200:
                    return
                last = f"HTTP {answer.status_code}: {answer.text}"
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                self.kill9()
                raise RuntimeError(
                    f"the daemon was not healthy after {timeout} s ({last}); log:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.05)

    @property
    def running(self) -> bool:
        """The process exists and has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def terminate(self, timeout: float = 10.0) -> int:
        """SIGTERM and wait; returns the exit code (kills and fails after ``timeout``)."""
        assert self.proc is not None, "the daemon was never started"
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(
                f"the daemon did not exit within {timeout} s of SIGTERM; log:\n{self.log_tail()}"
            ) from None

    def pause(self) -> None:
        """SIGSTOP: the process freezes mid-whatever (a GC pause, a frozen VM)."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def restart(self) -> None:
        """Kill the process if it still runs, start it again on the same config and store."""
        self.kill9()
        self.start()

    def close(self) -> None:
        """Always leaves no process behind."""
        try:
            self.kill9()
        finally:
            self.http.close()
            if self._pg is not None:
                self._pg.close()
                self._pg = None

    def __enter__(self) -> Daemon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- talking to it -------------------------------------------------------------------

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        """``GET path`` on the API."""
        return self.http.get(path, **kwargs)

    def post(self, path: str, json: Any = None, **kwargs: Any) -> httpx.Response:
        """``POST path`` with a JSON body."""
        return self.http.post(path, json=json, **kwargs)

    def cli(self, *args: str, timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """``python -m watcher.cli ARGS --api URL`` against this daemon."""
        return run_cli(*args, "--api", self.url, timeout=timeout)

    def log(self) -> str:
        """Everything the process wrote (all starts)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the log."""
        return "\n".join(self.log().splitlines()[-lines:])

    # -- helpers -------------------------------------------------------------------------

    def chain_info(self) -> dict[str, Any]:
        """``GET /v1/chains`` entry of the chain ``local``."""
        answer = self.get("/v1/chains")
        answer.raise_for_status()
        return next(c for c in answer.json() if c["name"] == CHAIN)

    def head(self) -> int | None:
        """The daemon's processed head."""
        number = self.chain_info()["head_number"]
        return None if number is None else int(number)

    def wait_head(self, number: int, block_hash: str | None = None, timeout: float = 30.0) -> None:
        """Wait until the daemon processed ``number`` (and, if given, with ``block_hash``)."""

        def reached() -> bool:
            info = self.chain_info()
            if block_hash is not None:
                return bool(info["head_hash"] == block_hash)
            return info["head_number"] is not None and int(info["head_number"]) >= number

        wait_for(reached, timeout, what=f"daemon head {number} {block_hash or ''}".strip())

    def register(self, tx_hash: str, **fields: Any) -> dict[str, Any]:
        """``POST /v1/settlements`` that must succeed (201 or 200); returns the view."""
        answer = self.post("/v1/settlements", {"chain": CHAIN, "tx_hash": tx_hash, **fields})
        assert answer.status_code in (200, 201), answer.text
        view: dict[str, Any] = answer.json()
        return view

    def settlement(self, settlement_id: str) -> dict[str, Any]:
        """``GET /v1/settlements/{id}`` that must succeed."""
        answer = self.get(f"/v1/settlements/{settlement_id}")
        assert answer.status_code == 200, answer.text
        view: dict[str, Any] = answer.json()
        return view

    def wait_verdict(
        self, settlement_id: str, verdicts: str | tuple[str, ...], timeout: float = 30.0
    ) -> dict[str, Any]:
        """Wait until the settlement's verdict is one of ``verdicts``; returns the view."""
        wanted = (verdicts,) if isinstance(verdicts, str) else verdicts
        seen: dict[str, Any] = {}

        def check() -> dict[str, Any] | None:
            view = self.settlement(settlement_id)
            seen["verdict"] = view["verdict"]
            return view if view["verdict"] in wanted else None

        try:
            return wait_for(check, timeout, interval=0.1, what=f"{settlement_id} → {wanted}")
        except TimeoutError as exc:
            raise AssertionError(
                f"{exc}; last verdict {seen.get('verdict')}; log:\n{self.log_tail()}\n"
                f"{self.stacks()}"
            ) from None

    def stacks(self) -> str:
        """Every thread's stack of the running daemon (SIGUSR1: the daemon writes them to
        its log), for a failed wait to show where the daemon was."""
        if self.proc is None or self.proc.poll() is not None:
            return "(no running daemon: no stacks)"
        before = len(self.log())
        os.kill(self.proc.pid, signal.SIGUSR1)
        try:
            wait_for(lambda: "File " in self.log()[before:], 5, what="the daemon's stacks")
        except TimeoutError:
            return "(the daemon wrote no stacks)"
        time.sleep(0.2)  # the dump is written thread by thread
        return "stacks:\n" + self.log()[before:]

    # -- what a user reads through the API (e2e tests assert on these, not on tables) -------

    def _ok(self, path: str, **params: Any) -> Any:
        answer = self.get(path, params=params)
        assert answer.status_code == 200, f"GET {path}: {answer.status_code} {answer.text}"
        return answer.json()

    def settlements(self, **filters: Any) -> list[dict[str, Any]]:
        """Every settlement ``GET /v1/settlements`` lists (all its pages), oldest first."""
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = self._ok(
                "/v1/settlements", limit=500, **filters, **({"cursor": cursor} if cursor else {})
            )
            items += page["items"]
            cursor = page["next_cursor"]
            if cursor is None:
                return items

    def settlements_of(self, tx_hash: str) -> list[dict[str, Any]]:
        """The listed settlements of ``tx_hash`` (none after a refused registration)."""
        return [s for s in self.settlements() if s.get("tx_hash") == tx_hash.lower()]

    def events(self, settlement_id: str) -> list[dict[str, Any]]:
        """``GET /v1/settlements/{id}/events``."""
        events: list[dict[str, Any]] = self._ok(f"/v1/settlements/{settlement_id}/events")
        return events

    def timeline(self, settlement_id: str) -> list[dict[str, Any]]:
        """The steps of ``GET /v1/settlements/{id}/timeline``."""
        steps: list[dict[str, Any]] = self._ok(f"/v1/settlements/{settlement_id}/timeline")["steps"]
        return steps

    def deliveries(self, **filters: Any) -> list[dict[str, Any]]:
        """``GET /v1/deliveries`` (one page of up to 1,000 rows)."""
        rows: list[dict[str, Any]] = self._ok("/v1/deliveries", limit=1000, **filters)
        return rows

    def db(self) -> sqlite3.Connection:
        """A read-only connection to the daemon's SQLite store (close it after use)."""
        return sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=10.0)

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Rows of one read-only query on the store (``?`` placeholders on both backends).

        On PostgreSQL one autocommit connection is kept for the life of this object (each
        query still sees every commit so far): the handoff tests poll lease rows many
        times a second, and a connection per query cost a backend start each time."""
        if self.store_url.startswith("postgres"):
            import psycopg

            if self._pg is None or self._pg.closed:
                self._pg = psycopg.connect(self.store_url, autocommit=True)
            return list(self._pg.execute(sql.replace("?", "%s"), params).fetchall())
        conn = self.db()
        try:
            return list(conn.execute(sql, params).fetchall())
        finally:
            conn.close()
