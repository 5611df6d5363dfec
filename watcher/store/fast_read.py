"""The store's one raw read: a prebuilt statement on a bare driver connection, awaited on the
API's event loop (``GET /v1/settlements/{id}``, the read callers poll).

SQLAlchemy's per-statement machinery (a pooled connection checked out and reset, the pool's
pre-ping, the autobegin, the execution context, the result wrapper) costs this read many
times what the database's answer does: 241 against 16 µs on SQLite, 457 against 62 µs on
PostgreSQL (measured in process). So the reader :class:`~watcher.store.db.Db` keeps one
more way in, for this statement alone: its SQLAlchemy statement compiled once for the
dialect, run as text on the driver, its columns converted by the dialect's own result
processors (the same row, the same Python values as through the engine).

- SQLite (a file): one ``sqlite3`` connection in autocommit mode, read-only
  (``PRAGMA query_only``). Every statement is its own WAL read transaction over the latest
  commit, ended when stepped to its end: it never pins the log against a checkpoint and
  never waits for a writer, so it runs on the event loop directly (a local page-cache
  read).
- PostgreSQL: a few ``psycopg`` asynchronous connections in autocommit mode (no transaction
  is ever held open, no lock), awaited: a network round trip never stalls the event loop.
  psycopg prepares a statement it has run a few times, so the server parses it once.

A driver error leaves as :class:`~watcher.store.errors.StoreUnavailable` (the connection is
dropped and opened again by the next read), as from the engine.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import JSON
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import Select

Converter = Callable[[Any], Any]
Listener = Callable[[str, Any], None]
BUSY_TIMEOUT_MS = 15000
"""As the engine's connections (watcher/store/db.py): a WAL reader waits only on recovery."""
PG_CONNECTIONS = 8
"""PostgreSQL connections the read may hold: each answer takes a fraction of a millisecond,
so a few serve every connection the API has open."""


class Prepared:
    """A statement compiled for a dialect: its SQL text, how its parameters are passed, and
    per result column its name and SQLAlchemy's conversion (None: the value as the driver
    has it)."""

    def __init__(self, statement: Select[Any], dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        self.sql = str(compiled)
        self.order = tuple(compiled.positiontup or ())
        """The parameters' names in order (a positional style: SQLite's ``?``), else empty
        (a named style: PostgreSQL's ``%(name)s`` takes the mapping)."""
        self.columns: tuple[tuple[str, Converter | None], ...] = tuple(
            (c.name, c.type.dialect_impl(dialect).result_processor(dialect, None))
            for c in statement.selected_columns
        )
        self._names = tuple(name for name, _ in self.columns)
        self._converted = tuple(
            (c.name, _json_null(convert) if isinstance(c.type, JSON) else convert)
            for c, (_, convert) in zip(statement.selected_columns, self.columns, strict=True)
            if convert is not None
        )
        """The columns SQLAlchemy converts (JSON, booleans...): the others are taken as the
        driver gives them, in one ``zip`` (a per-column test cost a settlement read more
        than its statement)."""

    def params(self, values: Mapping[str, Any]) -> Any:
        """The parameters as the driver takes them."""
        return [values[n] for n in self.order] if self.order else dict(values)

    def mapping(self, row: tuple[Any, ...]) -> dict[str, Any]:
        """One result row by column name, converted as SQLAlchemy converts it."""
        mapped = dict(zip(self._names, row, strict=True))
        for name, convert in self._converted:
            value = mapped[name]
            if value is not None:
                mapped[name] = convert(value)
        return mapped


def _json_null(convert: Converter) -> Converter:
    """A JSON column's conversion, answering its stored ``null`` (a JSON column written
    None: ``dependent_state`` of nearly every row) without the parser: the same None."""

    def converted(value: Any) -> Any:
        return None if value == "null" else convert(value)

    return converted


class FastRead(Protocol):
    """The raw read of one backend (see the module doc)."""

    statements: int
    """Statements run so far (what a test counts beside the engines' own)."""
    errors: tuple[type[Exception], ...]
    """The driver's errors (the store's edge maps them)."""
    listeners: list[Listener]
    """Called with each statement's SQL and parameters before it runs (as SQLAlchemy's
    ``before_cursor_execute``: tests count statements and read their plans)."""

    async def rows(self, statement: Select[Any], params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Every row of ``statement``; raises the driver's error."""
        ...

    def close(self) -> None:
        """Close the connections (a later read opens them again)."""
        ...


class Compiled:
    """Each statement compiled once for one dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._known: dict[int, tuple[Select[Any], Prepared]] = {}

    def __call__(self, statement: Select[Any]) -> Prepared:
        known = self._known.get(id(statement))
        if known is None or known[0] is not statement:
            known = self._known[id(statement)] = (statement, Prepared(statement, self._dialect))
        return known[1]


class SqliteRead:
    """One read-only connection to a SQLite file (see the module doc)."""

    errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(self, database: str, dialect: Dialect) -> None:
        self._uri = Path(database).resolve().as_uri() + "?mode=rw"  # the store's: never created
        self._compiled = Compiled(dialect)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self.statements = 0
        self.listeners: list[Listener] = []

    async def rows(self, statement: Select[Any], params: Mapping[str, Any]) -> list[dict[str, Any]]:
        prepared = self._compiled(statement)
        values = prepared.params(params)
        for listener in self.listeners:
            listener(prepared.sql, values)
        with self._lock:  # one caller at a time (the event loop's thread, in the daemon)
            try:
                conn = self._conn or self._open()
                found = conn.execute(prepared.sql, values).fetchall()
            except sqlite3.Error:
                self._drop()
                raise
            self.statements += 1
        return [prepared.mapping(row) for row in found]

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._uri, uri=True, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA query_only=ON")
        except sqlite3.Error:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _drop(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()
