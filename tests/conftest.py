"""Shared fixtures: real anvil nodes, the machine's PostgreSQL, stores on both backends.

Under ``CI=true`` a missing service fails the test instead of skipping it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.anvil import ANVIL_BIN, Anvil, in_ci

if TYPE_CHECKING:
    from tests.support.rigs import RigFactory

PG_BASE = os.environ.get("FINALITY_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


LONGEST_FIRST = (
    "tests/e2e/test_cli.py",
    "tests/e2e/test_min_versions.py",  # its venv, when built: mostly waiting on downloads
    "tests/e2e/test_chaos_soak.py",
    "tests/integration/test_receipts_build.py",
    "tests/e2e/test_secrets.py",
    "tests/e2e/test_handoff_kill_loop.py",
    "tests/e2e/test_verify_cli.py",
    "tests/e2e/test_process.py",
    "tests/e2e/test_schemathesis.py",
    "tests/e2e/test_payments.py",
    "tests/e2e/test_console.py",
    "tests/e2e/test_listing_batch.py",
    "tests/e2e/test_handoff_daemons.py",
    "tests/e2e/test_delivery_crash.py",
    "tests/integration/test_budget.py",
    "tests/e2e/test_handoff_balance.py",
    "tests/integration/test_failover_stall.py",
    "tests/e2e/test_handoff_busy_owner.py",
)
"""The files that take longest (``--durations``), in that order. ``make test`` hands whole
files to pytest-xdist workers in collection order (``--dist loadfile``); started first, they
run beside the many short ones instead of alone at the end."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move the files of :data:`LONGEST_FIRST` to the front (a stable sort: the order inside
    a file, and so its module-scoped fixtures, stay as they are)."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    root = config.rootpath

    def key(item: pytest.Item) -> int:
        try:
            return rank.get(item.path.relative_to(root).as_posix(), len(rank))
        except ValueError:
            return len(rank)

    items.sort(key=key)


def _missing(what: str) -> None:
    if in_ci():
        pytest.fail(f"{what} is required under CI=true")
    pytest.skip(f"{what} not available")


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never read the developer's RPC URLs or config by accident."""
    for name in ("ETH_RPC_URL", "BASE_RPC_URL", "ARBITRUM_RPC_URL", "FINALITY_CONFIG"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def start_anvil() -> Iterator[Callable[..., Anvil]]:
    """Factory: ``start_anvil("--block-time", "1")`` starts a node that is killed after the test."""
    if not ANVIL_BIN.exists():
        _missing(f"anvil at {ANVIL_BIN}")
    nodes: list[Anvil] = []

    def start(*args: str) -> Anvil:
        node = Anvil(*args)
        nodes.append(node)
        return node

    yield start
    for node in nodes:
        node.stop()


@pytest.fixture
def anvil(start_anvil: Callable[..., Anvil]) -> Anvil:
    """An automining anvil (a block per transaction, or per ``anvil_mine``)."""
    return start_anvil()


@pytest.fixture
def make_rig(tmp_path: Path) -> Iterator[RigFactory]:
    """Factory: ``make_rig(anvil, confirmations=3, poll=True, ...)`` → a watcher over a fresh
    SQLite store (or ``store_url``); every store is closed after the test."""
    from tests.support.rigs import RigFactory  # the engine's imports, only where used

    factory = RigFactory(tmp_path)
    yield factory
    factory.close()


def _pg_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_BASE, connect_timeout=3):
            return True
    except Exception:
        return False


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped after the test."""

    if not _pg_available():
        _missing(f"PostgreSQL at {PG_BASE}")
    with fresh_pg_schema("fw_") as url:
        yield url


@pytest.fixture(scope="module")
def module_pg_url() -> Iterator[str]:
    """As ``pg_url``, one schema for a whole test module (a big table filled once)."""
    if not _pg_available():
        _missing(f"PostgreSQL at {PG_BASE}")
    with fresh_pg_schema("fw_") as url:
        yield url


@contextmanager
def fresh_pg_schema(prefix: str) -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a new schema named ``prefix`` + random hex,
    dropped on exit (the tests' ``pg_url`` and the benchmarks use it)."""
    import psycopg

    schema = prefix + uuid.uuid4().hex[:12]
    with psycopg.connect(PG_BASE, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{PG_BASE}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(PG_BASE, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    """The same test on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/finality.db"
    return str(request.getfixturevalue("pg_url"))
