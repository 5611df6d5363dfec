"""Fixtures of the end-to-end tests: the daemon as a real process against a real anvil."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.anvil import ANVIL_BIN, Anvil, in_ci
from tests.support.daemon import Daemon


def _need_anvil() -> None:
    if not ANVIL_BIN.exists():
        if in_ci():
            pytest.fail(f"anvil at {ANVIL_BIN} is required under CI=true")
        pytest.skip(f"anvil at {ANVIL_BIN} not available")


@pytest.fixture(scope="module")
def module_anvil() -> Iterator[Anvil]:
    """One automining anvil shared by the tests of a module."""
    _need_anvil()
    node = Anvil()
    yield node
    node.stop()


@pytest.fixture(scope="module")
def module_daemon(
    module_anvil: Anvil, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    """One daemon (default settings) shared by the tests of a module."""
    daemon = Daemon(tmp_path_factory.mktemp("daemon"), module_anvil.url)
    yield daemon
    daemon.close()


@pytest.fixture
def make_daemon(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Factory: ``make_daemon(anvil.url, confirmations=5)``; every daemon is killed afterwards."""
    daemons: list[Daemon] = []

    def make(anvil_url: str, **kwargs: Any) -> Daemon:
        start = kwargs.pop("start", True)
        daemon = Daemon(tmp_path / f"d{len(daemons)}", anvil_url, start=False, **kwargs)
        daemons.append(daemon)
        if start:
            daemon.start()
        return daemon

    yield make
    for daemon in daemons:
        daemon.close()
