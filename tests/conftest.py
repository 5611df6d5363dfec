"""Shared fixtures: real anvil nodes, the machine's PostgreSQL, stores on both backends.

Under ``CI=true`` a missing service fails the test instead of skipping it.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.anvil import ANVIL_BIN, Anvil, in_ci

if TYPE_CHECKING:
    from tests.support.jobs import RedisSpace
    from tests.support.rigs import RigFactory

PG_BASE = os.environ.get("FINALITY_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")

# Compiled bytecode is kept between runs even where the shell sets PYTHONDONTWRITEBYTECODE
# (as `make test-fast` does). Without a cache each pytest-xdist worker compiles the project
# and every test module again, rewriting the asserts of the plugins' distributions too
# (schemathesis and hypothesis, about 250 modules), and so does each worker's daemon zygote
# and each fresh `finality` interpreter: collecting tests/integration and tests/unit costs
# 31 s of CPU per worker without the cache, 16 s with it. Removed from the environment
# before xdist starts its workers, so they and every process the tests start inherit it.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config) -> None:
    """In pytest-xdist's controller, before it starts the workers: compile the project and
    the tests once, instead of once in each worker (tests/support/bytecode.py)."""
    from tests.support.bytecode import warm

    warm(config, config.rootpath)


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


NOT_FAST = (
    # start a process: mypy over the docs, python -m, a fresh interpreter's imports
    "test_client_docs_types.py",
    "test_dependencies.py",
    "test_public_api.py",
    "test_slim_install.py",
    "test_support_ports.py",
    # reach for a server that is not there (a refused Redis connection)
    "test_sources_jobs_mapping.py",
    # seconds each: hundreds of generated examples, BLS pairings, 200,000-deep nests
    "test_guard_properties.py",
    "test_canonical_jcs.py",
    "test_canonical_fast.py",
    "test_consensus_receipts.py",
    "test_consensus_bls.py",
    "test_input_bounds.py",
    "test_receipts_tamper.py",
    "test_verify_never_crashes.py",
    "test_receipts_primitives.py",
    "test_sources_record.py",
    # read every source file of the project (the wiring test through the layering one's)
    "test_front_layout.py",
    "test_layering.py",
    "test_app_wiring.py",
)
"""Files of tests/unit left out of the fast tier (``-m fast``): the whole suite runs them."""

FAST_ANYWHERE = ("test_apply_block*.py", "test_fetch_block*.py")
"""The engine's block step over a store with no node, and its fetch over a scripted node:
fast wherever their files live."""


def is_fast(path: Path, root: Path) -> bool:
    """The fast tier, by path: tests/unit without :data:`NOT_FAST`, and the engine's block
    step tests anywhere. No process, no network, no database server: a developer runs it on
    every save (``make test-fast``)."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return False
    if any(path.match(pattern) for pattern in FAST_ANYWHERE):
        return True
    return parts[:2] == ("tests", "unit") and path.name not in NOT_FAST


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m fast`` alone, a test file with no fast test is not even imported (some
    read every source file of the project at import, for their parameters)."""
    if config.option.markexpr != "fast" or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    return not is_fast(collection_path, config.rootpath) or None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the fast tier (:func:`is_fast`), and move the files of :data:`LONGEST_FIRST` to
    the front (a stable sort: the order inside a file, and so its module-scoped fixtures, stay
    as they are)."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    root = config.rootpath
    fast = pytest.mark.fast
    for item in items:
        if is_fast(item.path, root):
            item.add_marker(fast)

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


@pytest.fixture
def space() -> Iterator[RedisSpace]:
    """A private key space on the machine's Redis (keys removed after the test)."""
    from tests.support.jobs import RedisSpace, need_redis

    need_redis()
    s = RedisSpace()
    yield s
    s.cleanup()


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
