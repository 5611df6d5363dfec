"""The store's edge: the only door to the database, and where its errors are mapped.

Every read and write of the store goes through :class:`Db` (``begin`` for a write
transaction, ``connect`` for reads). A SQLAlchemy error raised anywhere inside either, by
the driver or by the body of the ``with`` block, leaves as a :mod:`watcher.store.errors`
type: :class:`StoreConflict` for a uniqueness violation, :class:`StoreUnavailable` for
anything else. Code outside ``watcher/store/`` therefore catches ``StoreError`` and never
imports SQLAlchemy, as ``chains/errors.py`` keeps web3's exceptions inside ``chains/``.

SQLite (the default) runs in WAL mode with ``synchronous=NORMAL``: a crashed *process* loses
no committed transaction (only a power loss could drop the last few). Write transactions
start with ``BEGIN IMMEDIATE`` so two writers queue on the busy timeout instead of failing
on a lock upgrade. PostgreSQL is used through psycopg 3 with the same tables.

A store that cannot be written is said so at once, by name: the writer remembers why its
last write failed (:meth:`Db.write_problem`, what ``/healthz`` reports) until a write
succeeds again, logs the failure once and then at most every :data:`LOG_EVERY_S`, and the
reason in :class:`StoreUnavailable` is a fixed phrase (:func:`reason_of`): never the
driver's text, which can carry the URL or a statement's parameters.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import URL, Engine, create_engine, event, make_url
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import NullPool, Pool
from sqlalchemy.sql import Select

from watcher.store.errors import StoreConflict, StoreError, StoreUnavailable
from watcher.store.fast_read import FastRead, Listener, SqliteRead
from watcher.store.fast_read_postgres import PgRead
from watcher.store.files import FileRefused, private_file
from watcher.store.json_text import json_text

log = logging.getLogger("finality.store")

LOG_EVERY_S = 60.0
"""While writes keep failing, one log line per this many seconds (the first at once)."""

PROBE_EVERY_S = 1.0
"""While writes fail, :meth:`Db.write_problem` tries one harmless write this often."""

_REASONS = (
    # First: "must be a superuser to terminate superuser process" (and the other refusals
    # of pg_terminate_backend) must not read as a lost connection.
    ("permission denied", "the database role lacks a privilege this needs"),
    ("must be a superuser", "the database role lacks a privilege this needs"),
    ("must be a member", "the database role lacks a privilege this needs"),
    ("readonly", "the database is read-only"),
    ("read-only", "the database is read-only"),
    ("read only", "the database is read-only"),
    ("disk is full", "the disk is full"),
    ("no space", "the disk is full"),
    ("disk i/o", "a disk I/O error"),
    ("database is locked", "the database is locked by another writer"),
    ("unable to open", "the database file cannot be opened"),
    ("connection refused", "the database server refuses connections"),
    ("could not connect", "the database server cannot be reached"),
    ("connection failed", "the database server cannot be reached"),
    ("terminat", "the connection to the database server was lost"),
    ("closed", "the connection to the database server was lost"),
    ("timeout", "the database server does not answer in time"),
    ("timed out", "the database server does not answer in time"),
)
"""Driver message fragments (lower case) and the reason shown for them."""

_OUTAGES = (OperationalError, InterfaceError, PoolTimeout)
"""The errors that say the database cannot take writes (a value it refuses is no outage)."""

IDLE_TXN_MS = 5000
"""PostgreSQL ends a session idle inside a transaction for this long (see make_engine)."""

OUTBOX_CHANGED = "finality.outbox_changed"
"""Key in a connection's ``info`` set by a write to the delivery outbox (see
:func:`note_outbox_changed`)."""


def normalise_url(url: str) -> str:
    """Map ``postgresql://`` to the psycopg 3 driver; leave other URLs as they are."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def shown_url(url: str) -> str:
    """``url`` as messages may show it: the password masked (``***``), as in logs and
    errors a store URL must never carry its secret."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not even parseable: keep only the scheme
        return url.split("://", 1)[0] + "://***"


def mapped_error(exc: SQLAlchemyError) -> StoreError:
    """The store error a SQLAlchemy error becomes: a conflict names the broken rule (the
    driver's text names table and columns, never values); anything else only its type,
    since a driver's message can carry the URL (a password) or a statement's parameters."""
    if isinstance(exc, IntegrityError):
        return StoreConflict(str(exc.orig).splitlines()[0] if exc.orig is not None else "")
    return StoreUnavailable(reason_of(exc))


def reason_of(exc: Exception) -> str:
    """Why the database failed, as a fixed phrase picked by the driver's message (which is
    matched, never shown), else the error's type."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).lower()
    for fragment, reason in _REASONS:
        if fragment in text:
            return reason
    return type(exc).__name__


class WriteHealth:
    """Why the last write failed (None: it succeeded), and when to log it again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.problem: str | None = None
        self.failures = 0
        self._logged_at = 0.0
        self.probed_at = 0.0

    def failed(self, reason: str) -> None:
        """A write failed: the first failure is logged at once, then one line a minute."""
        now = time.monotonic()
        with self._lock:
            first = self.problem is None
            self.problem, self.failures = reason, self.failures + 1
            due = first or now - self._logged_at >= LOG_EVERY_S
            if due:
                self._logged_at = now
            failures = self.failures
        if first:
            log.error("store: writes fail: %s", reason)
        elif due:
            log.error("store: writes still fail: %s (%d failures so far)", reason, failures)

    def succeeded(self) -> None:
        """A write succeeded: the store is writable again (logged once)."""
        if self.problem is None:
            return
        with self._lock:
            was, failures, self.problem, self.failures = self.problem, self.failures, None, 0
        if was is not None:
            log.warning("store: writes succeed again (after %d failures: %s)", failures, was)


def note_outbox_changed(conn: Connection) -> None:
    """Say that ``conn``'s transaction added or changed delivery outbox rows: its commit
    moves :attr:`Db.outbox_commits`, which the sender reads to know whether a poll gave it
    work (a transaction that failed or rolled back moves nothing)."""
    conn.info[OUTBOX_CHANGED] = True


class Db:
    """One SQLAlchemy engine behind the edge: connections whose errors are store errors;
    the reader also has the store's one raw read (:meth:`fast_rows`)."""

    def __init__(self, engine: Engine, fast: FastRead | None = None) -> None:
        self._engine = engine
        self._fast = fast
        self.writes = WriteHealth()
        self.outbox_commits = 0
        """Committed transactions of this process that changed the delivery outbox (see
        :func:`note_outbox_changed`): only ever grows."""
        self._count_lock = threading.Lock()

    @property
    def dialect(self) -> Dialect:
        """The database's dialect (``dialect.name``: ``sqlite`` or ``postgresql``)."""
        return self._engine.dialect

    @contextlib.contextmanager
    def begin(self) -> Iterator[Connection]:
        """A write transaction: committed on exit, rolled back on error; an unavailable
        database is remembered (:meth:`write_problem`) until a write succeeds."""
        outbox_changed = False
        try:
            with self._engine.begin() as conn:
                try:
                    yield conn
                finally:  # the flag never outlives the transaction (info is per connection)
                    outbox_changed = bool(conn.info.pop(OUTBOX_CHANGED, False))
        except SQLAlchemyError as exc:
            mapped = mapped_error(exc)
            if isinstance(mapped, StoreUnavailable) and isinstance(exc, _OUTAGES):
                self.writes.failed(mapped.cause)  # not a bad value: the database itself
            raise mapped from exc
        self.writes.succeeded()
        if outbox_changed:
            with self._count_lock:
                self.outbox_commits += 1

    def write_problem(self) -> str | None:
        """Why writes fail (None: the last one succeeded). While they fail, one harmless
        write (alembic's row set to itself) is tried at most every :data:`PROBE_EVERY_S`,
        so a store that became writable is seen at once even if nothing else writes."""
        health = self.writes
        if health.problem is None:
            return None
        now = time.monotonic()
        if now - health.probed_at >= PROBE_EVERY_S:
            health.probed_at = now
            with contextlib.suppress(StoreError), self.begin() as conn:
                conn.exec_driver_sql("UPDATE alembic_version SET version_num = version_num")
        return health.problem

    @contextlib.contextmanager
    def connect(self) -> Iterator[Connection]:
        """A connection for reads."""
        try:
            with self._engine.connect() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise mapped_error(exc) from exc

    async def fast_rows(
        self, statement: Select[Any], params: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """``statement``'s rows through the raw read (watcher/store/fast_read.py), awaited on
        the caller's event loop; a store with none (SQLite in memory) reads through the
        engine. A driver error leaves as :class:`StoreUnavailable`, as from :meth:`connect`."""
        if self._fast is None:
            with self.connect() as conn:
                return [dict(row) for row in conn.execute(statement, params).mappings()]
        try:
            return await self._fast.rows(statement, params)
        except self._fast.errors as exc:
            raise StoreUnavailable(reason_of(exc)) from exc

    @property
    def fast_statements(self) -> int:
        """How many statements :meth:`fast_rows` ran (beside the engine's: tests count both)."""
        return 0 if self._fast is None else self._fast.statements

    @property
    def fast_listeners(self) -> list[Listener]:
        """Called with each raw read's SQL and parameters before it runs (empty, and not
        called, without a raw read)."""
        return [] if self._fast is None else self._fast.listeners

    @property
    def engine(self) -> Engine:
        """The raw engine, for the store's own migrations (Alembic wants it whole)."""
        return self._engine

    @property
    def pool(self) -> Pool:
        """The connection pool (a test checks that nothing is left checked out)."""
        return self._engine.pool

    @property
    def url(self) -> URL:
        """The engine's URL (with its password masked when rendered)."""
        return self._engine.url

    def dispose(self) -> None:
        """Release every pooled connection, and the raw read's (reopened if used again)."""
        if self._fast is not None:
            self._fast.close()
        self._engine.dispose()


SCHEMA = "SELECT current_schema()"
"""The schema a session works in (the store's tables; several stores may share a database)."""


def session_name(instance_id: str, schema: str) -> str:
    """The ``application_name`` of ``instance_id``'s sessions on the store in ``schema``: a
    successor finds a lapsed owner's sessions by it (``lease_store.end_lapsed_sessions``).
    The hash tells apart the same instance id on two stores of one database; the readable
    part is for an operator's ``pg_stat_activity`` (PostgreSQL keeps 63 printable bytes)."""
    digest = hashlib.sha256(f"{schema}\0{instance_id}".encode()).hexdigest()[:16]
    readable = "".join(c if c.isascii() and c.isprintable() else "?" for c in instance_id)
    return f"finality {readable[:36]} {digest}"


def make_engine(url: str, immediate: bool, instance_id: str | None = None) -> Engine:
    """An engine for ``url`` (already normalised): PostgreSQL ends idle transactions and
    names each session after ``instance_id`` (:func:`session_name`); SQLite gets WAL, a busy
    timeout, and ``BEGIN IMMEDIATE`` for writers."""
    if not url.startswith("sqlite"):
        engine = create_engine(
            url, pool_pre_ping=True, pool_size=5, max_overflow=5, json_serializer=json_text
        )

        @event.listens_for(engine, "connect")
        def _on_pg_connect(dbapi_conn: Any, _record: Any) -> None:
            # A process paused inside a transaction (SIGSTOP, a frozen VM) would hold its
            # locks, the lease row's among them, for ever: the server ends such a session,
            # so a standby can take over and the paused writer's commit fails. Not one
            # stopped mid-pipeline: a successor ends those by the session's name.
            with dbapi_conn.cursor() as cursor:
                cursor.execute(f"SET idle_in_transaction_session_timeout = {IDLE_TXN_MS}")
                if instance_id is not None:
                    cursor.execute(SCHEMA)
                    (schema,) = cursor.fetchone()
                    name = session_name(instance_id, str(schema))
                    cursor.execute("SELECT set_config('application_name', %s, false)", (name,))
            dbapi_conn.commit()

        return engine
    engine = create_engine(
        url, poolclass=NullPool if ":memory:" in url else None, json_serializer=json_text
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves, below
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=15000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def open_dbs(url: str, instance_id: str | None = None) -> tuple[Db, Db]:
    """The writer and the reader of ``url`` (the same for PostgreSQL; SQLite reads with a
    plain ``BEGIN`` so readers never queue behind writers); ``instance_id`` names the
    sessions (:func:`make_engine`)."""
    driver_url = normalise_url(url)
    _keep_private(driver_url)
    try:
        writer = make_engine(driver_url, immediate=True, instance_id=instance_id)
        reader = (
            make_engine(driver_url, immediate=False) if driver_url.startswith("sqlite") else writer
        )
    except Exception as exc:  # SQLAlchemy raises several types for a bad URL
        raise StoreError(f"store url {shown_url(url)!r}: {type(exc).__name__}") from exc
    if reader is writer:
        both = Db(writer, PgRead(writer.url, writer.dialect))
        return both, both
    database = sqlite_file(driver_url)
    fast = None if database is None else SqliteRead(database, reader.dialect)
    return Db(writer), Db(reader, fast)


def sqlite_file(url: str) -> str | None:
    """The file of a SQLite URL, None for anything else (memory, ``file:`` URIs, a server)."""
    if not url.startswith("sqlite"):
        return None
    try:
        database = make_url(url).database
    except Exception:  # reported by make_engine, with the URL shown safely
        return None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return database


def _keep_private(url: str) -> None:
    """A SQLite file holds dependent state and delivery bodies: created 0600 (or narrowed to
    it) before SQLite opens it, its directory not writable by everyone (watcher/store/files)."""
    database = sqlite_file(url)
    if database is None:
        return
    try:
        private_file(Path(database), "store")
    except FileRefused as exc:
        raise StoreError(str(exc)) from None
    except OSError as exc:
        raise StoreError(f"store {database}: {exc.strerror or exc}") from None
