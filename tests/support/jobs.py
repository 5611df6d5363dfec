"""Jobs for real RQ and Celery workers, and the workers themselves as processes.

The job functions are what a worker imports (``tests.support.jobs.succeed``...): one that
returns a value, one that raises, one that never ends (to kill its worker mid-job).
:class:`RqWorker` and :class:`CeleryWorker` run ``rq worker`` / ``celery worker`` as real
subprocesses in their own process group, so ``kill9`` takes the worker and anything it
forked down at once, as a crash of the machine would.

Every test works in its own namespace on the machine's Redis (:class:`RedisSpace`): a DB
number set aside for these tests, keys and queue names carrying a random token, and only
those keys deleted afterwards; nothing else in Redis is touched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from tests.support.anvil import ROOT, in_ci

REDIS_HOST = os.environ.get("FINALITY_TEST_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("FINALITY_TEST_REDIS_PORT", "6379"))
REDIS_DB = int(os.environ.get("FINALITY_TEST_REDIS_DB", "11"))
"""The Redis database the job tests use (keys are namespaced inside it, too)."""

# -- job functions (run inside the workers) ------------------------------------------------


def succeed(value: Any = 42) -> dict[str, Any]:
    """Return a small JSON value built from ``value``."""
    return {"ok": True, "value": value}


def fail(message: str = "boom") -> None:
    """Raise, as a job that cannot do its work."""
    raise RuntimeError(message)


def sleep_forever(marker: str | None = None) -> None:
    """Never return (the test kills the worker); touches ``marker`` once running."""
    if marker is not None:
        Path(marker).touch()
    while True:
        time.sleep(0.2)


# -- Celery app (the worker imports ``tests.support.jobs:celery_app``) -------------------


def make_celery_app(broker_url: str, prefix: str, with_backend: bool = True) -> Any:
    """A Celery app on Redis (broker and result backend), every key under ``prefix``.

    A test sends tasks with ``with_backend=False``: the workers store the results, and the
    sender holds no result subscription to clean up."""
    from celery import Celery

    backend = broker_url if with_backend else None
    app = Celery("fwtest", broker=broker_url, backend=backend, set_as_current=False)
    app.conf.update(
        broker_transport_options={"global_keyprefix": prefix},
        result_backend_transport_options={"global_keyprefix": prefix},
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_track_started=True,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        worker_enable_remote_control=False,
    )
    app.task(succeed, name="tests.support.jobs.succeed")
    app.task(fail, name="tests.support.jobs.fail")
    app.task(sleep_forever, name="tests.support.jobs.sleep_forever")
    return app


if os.environ.get("FW_CELERY_BROKER"):
    celery_app = make_celery_app(
        os.environ["FW_CELERY_BROKER"], os.environ.get("FW_CELERY_PREFIX", "")
    )


# -- Redis namespace -----------------------------------------------------------------------


def redis_available() -> bool:
    """Whether the machine's Redis answers PING."""
    from redis import Redis
    from redis.exceptions import RedisError

    try:
        with Redis(host=REDIS_HOST, port=REDIS_PORT, socket_connect_timeout=2) as conn:
            return bool(conn.ping())
    except RedisError:
        return False


def need_redis() -> None:
    """Skip without Redis; under ``CI=true`` fail instead (a missing service is an error)."""
    import pytest

    if redis_available():
        return
    where = f"Redis at {REDIS_HOST}:{REDIS_PORT}"
    if in_ci():
        pytest.fail(f"{where} is required under CI=true")
    pytest.skip(f"{where} not available")


class RedisSpace:
    """A private corner of the test Redis DB: a token in every key and name we create."""

    def __init__(self) -> None:
        from redis import Redis

        self.token = "fwtest-" + uuid.uuid4().hex[:10]
        self.url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{REDIS_DB}"
        self.redis = Redis.from_url(self.url)

    def name(self, what: str) -> str:
        """A queue, job or worker name inside this space."""
        return f"{self.token}-{what}"

    def cleanup(self) -> int:
        """Delete every key carrying the token, and the token's members of RQ's shared
        sets; returns the keys deleted."""
        deleted = 0
        for key in self.redis.scan_iter(match=f"*{self.token}*", count=500):
            deleted += int(self.redis.delete(key))
        for shared in (b"rq:queues", b"rq:workers"):
            for member in self.redis.smembers(shared):
                if self.token.encode() in member:
                    self.redis.srem(shared, member)
        self.redis.close()
        return deleted


# -- workers as processes ------------------------------------------------------------------


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (read from /proc: children, their children...)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


class _Process:
    """A worker process in its own session, logging to a file."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.log_path = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                args,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill9(self) -> None:
        """SIGKILL the worker and everything it forked, at once (a crashed machine).

        Its process group is not enough: an RQ work horse calls ``setpgrp()`` and would
        survive its worker, running the job on, so descendants are found and killed too."""
        if self.proc.poll() is None:
            doomed = [self.proc.pid, *_descendants(self.proc.pid)]
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            for pid in doomed:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGKILL the worker and its descendants: a test's worker has nothing to save."""
        self.kill9()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class RqWorker(_Process):
    """``rq worker`` on one queue of ``space``, heartbeating every second."""

    def __init__(self, space: RedisSpace, queue: str, log: Path) -> None:
        super().__init__(
            [
                sys.executable,
                "-m",
                "rq.cli",
                "worker",
                "--url",
                space.url,
                "--name",
                space.name("rqworker"),
                "--job-monitoring-interval",
                "1",
                "--logging_level",
                "WARNING",
                queue,
            ],
            log,
            _env(),
        )


class CeleryWorker(_Process):
    """``celery worker`` (solo pool) on one queue, broker and backend in ``space``."""

    def __init__(self, space: RedisSpace, queue: str, log: Path) -> None:
        super().__init__(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "tests.support.jobs:celery_app",
                "worker",
                "--pool",
                "solo",
                "--concurrency",
                "1",
                "-Q",
                queue,
                "-n",
                f"{space.name('celery')}@localhost",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel",
                "WARNING",
            ],
            log,
            _env(FW_CELERY_BROKER=space.url, FW_CELERY_PREFIX=space.token + ":"),
        )
