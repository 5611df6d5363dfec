"""Files only this daemon's user may read: the SQLite store (dependent state, delivery
bodies) and the development signing key.

:func:`private_file` makes sure such a file is mode 0600 before anything is written into
it: a new one is created 0600 (exclusively, so nobody can slip one in between a check and
the open), an existing one readable by others is narrowed to 0600 with a warning. It is
refused when it belongs to another user (someone placed it there first: a store or a key
they can read and write) or when its directory is writable by everyone without the sticky
bit (anyone could replace it). SQLite gives its ``-wal`` and ``-shm`` files the mode of
the database file, so they are 0600 as well.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("finality.files")

PRIVATE = 0o600


class FileRefused(Exception):
    """The file cannot be kept private (one-line reason naming the path)."""


def private_file(path: Path, what: str) -> bool:
    """Make ``path`` a file only this user can read and write; returns True if it was
    created now (empty). ``what`` names it in messages (``store``, ``dev key file``).
    Raises :class:`FileRefused` (see the module doc) or :class:`OSError`."""
    check_directory(path, what)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE)
    except FileExistsError:
        check_existing(path, what)
        return False
    os.close(fd)
    return True


def check_directory(path: Path, what: str) -> None:
    """Refuse a file whose directory every user may write to (without the sticky bit)."""
    directory = path.parent if str(path.parent) else Path(".")
    mode = directory.stat().st_mode
    if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
        raise FileRefused(
            f"{what} {path}: its directory {directory} is writable by every user, who could "
            "replace the file; use a directory only this user can write to"
        )


def check_existing(path: Path, what: str) -> None:
    """An existing file: ours, and 0600 (narrowed if it was wider)."""
    info = path.stat()
    if info.st_uid != os.geteuid():
        raise FileRefused(
            f"{what} {path} belongs to another user (uid {info.st_uid}): refusing to use it"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, PRIVATE)
        log.warning(
            "%s %s was readable by other users (mode %o): narrowed to 0600",
            what,
            path,
            stat.S_IMODE(info.st_mode),
        )
