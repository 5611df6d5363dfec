"""One daemon per SQLite store: an OS file lock held for the daemon's whole life.

Two daemons on one SQLite file would both watch every settlement: each settlement would get
two finality receipts under two keys and two commits, and the signer list would follow
whichever started last. SQLite has no leases between instances (PostgreSQL has: several
instances share one through the handoff manager), so the second daemon is refused before
it touches the store.

The lock is ``flock`` on ``<database>.lock`` beside the database: the kernel drops it when
the process ends, however it ends (``kill -9`` included), so a stale file never blocks a
restart. The file holds who took it (pid, host, when), read back to name the holder in the
refusal. ``flock`` and SQLite's own POSIX record locks are independent, so this lock never
interferes with the database's.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path
from typing import IO

from watcher.store.db import normalise_url, sqlite_file
from watcher.store.errors import StoreError


class StoreInUse(StoreError):
    """Another live daemon holds the SQLite store (the message names its pid and host)."""


class InstanceLock:
    """The held lock of one SQLite store; :meth:`release` (or the process's end) frees it."""

    def __init__(self, path: Path, handle: IO[str]) -> None:
        self.path = path
        self._handle: IO[str] | None = handle

    def release(self) -> None:
        """Free the lock (the file stays: removing it would race a daemon taking it)."""
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


def lock_store(url: str) -> InstanceLock | None:
    """Take the lock of the SQLite store at ``url`` (None for other stores: PostgreSQL
    instances share the store through leases, an in-memory database is nobody else's);
    :class:`StoreInUse` naming the holder if another process has it."""
    database = sqlite_file(normalise_url(url))
    if database is None:
        return None
    path = Path(f"{database}.lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StoreError(f"store lock {path}: {exc.strerror}") from None
    handle = os.fdopen(fd, "r+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = handle.read(200).strip() or "another process"
        handle.close()
        raise StoreInUse(
            f"store {database} is in use by another finality daemon ({holder}; lock "
            f"{path}): one daemon per SQLite store; use PostgreSQL for several instances"
        ) from None
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on host {socket.gethostname()}, since {stamp}\n")
    handle.flush()
    return InstanceLock(path, handle)
