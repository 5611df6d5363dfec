"""The files that hold secrets are this user's only: the SQLite store (dependent
state, delivery bodies) and the development signing key are created 0600, whatever the
umask; a wider existing one is narrowed; one in a directory everyone may write to is
refused. Checked with os.stat on the files a real daemon and the real store and signer make."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.anvil import Anvil
from tests.support.daemon import Daemon
from watcher.config.sections import SigningConfig
from watcher.receipts.signer import SigningKeyError, load_signer
from watcher.store import Store, StoreError

DEV = [("local", 31337)]


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture(autouse=True)
def loose_umask() -> Iterator[None]:
    """A umask that would make new files world-readable (0644): 0600 must not rely on it."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_the_daemon_creates_its_store_0600(
    anvil: Anvil, make_daemon: Callable[..., Daemon]
) -> None:
    daemon = make_daemon(anvil.url)
    daemon.register(anvil.send())  # a write: the WAL exists now
    assert mode(daemon.db_path) == 0o600
    for suffix in ("-wal", "-shm"):
        side = daemon.db_path.with_name(daemon.db_path.name + suffix)
        if side.exists():
            assert mode(side) == 0o600, suffix
    assert not stat.S_IMODE(os.stat(daemon.dir).st_mode) & stat.S_IWOTH


def test_an_existing_store_readable_by_others_is_narrowed(tmp_path: Path) -> None:
    db = tmp_path / "finality.db"
    Store.open(f"sqlite:///{db}").close()
    os.chmod(db, 0o644)
    Store.open(f"sqlite:///{db}").close()
    assert mode(db) == 0o600


def test_a_store_in_a_directory_everyone_may_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(StoreError, match="writable by every user"):
        Store.open(f"sqlite:///{shared}/finality.db")
    assert not (shared / "finality.db").exists()


def test_the_dev_key_is_created_0600_and_kept_so(tmp_path: Path) -> None:
    key_file = tmp_path / "dev-key"
    config = SigningConfig(dev_key_file=str(key_file))
    first = load_signer(config, DEV, environ={})
    assert mode(key_file) == 0o600
    os.chmod(key_file, 0o644)
    assert load_signer(config, DEV, environ={}).address == first.address
    assert mode(key_file) == 0o600


def test_a_dev_key_in_a_directory_everyone_may_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    config = SigningConfig(dev_key_file=str(shared / "dev-key"))
    with pytest.raises(SigningKeyError, match="writable by every user"):
        load_signer(config, DEV, environ={})
