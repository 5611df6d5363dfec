"""A plain ``sqlite3`` connection for the reads the API answers on its event loop
(no thread hop for the reads callers poll: bench/README.md, "API under load").

SQLAlchemy's per-statement machinery (a pooled connection checked out and reset, the
autobegin and its ``BEGIN`` listener, the execution context, the result wrapper) costs a
``GET /v1/settlements/{id}`` about fifteen times what SQLite's answer does (241 µs against
16 µs, measured in process). So the reader :class:`~watcher.store.db.Db` of a SQLite file
keeps one more connection, opened on first use, that runs a prebuilt SQLAlchemy statement
as its compiled text and converts the columns with the dialect's own result processors:
the same row, the same Python values, without the machinery.

It stays correct beside the writers in other threads because it holds no transaction: in
autocommit mode every statement is its own WAL read transaction, over the latest commit,
and ends when the statement is stepped to its end (``fetchall``), so it never pins the
log against a checkpoint and never waits for a writer. ``PRAGMA query_only`` makes it
read-only at SQLite's level.

It serves one thread, the first that reads through it (in the daemon, the event loop: the
only caller of its statement on SQLite); any other thread gets None and reads through the
engine as before, so no thread ever waits for another's read here.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.sql import Select

Converter = Callable[[Any], Any]
BUSY_TIMEOUT_MS = 15000
"""As the engine's connections (watcher/store/db.py): a WAL reader waits only on recovery."""


class Prepared:
    """A statement compiled for a dialect: its SQL text, the order of its parameters, and
    per result column its name and SQLAlchemy's conversion (None: the value as SQLite has it)."""

    def __init__(self, statement: Select[Any], dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        self.sql = str(compiled)
        self.order = tuple(compiled.positiontup or ())
        self.columns: tuple[tuple[str, Converter | None], ...] = tuple(
            (c.name, c.type.dialect_impl(dialect).result_processor(dialect, None))
            for c in statement.selected_columns
        )

    def mapping(self, row: tuple[Any, ...]) -> dict[str, Any]:
        """One result row by column name, converted as SQLAlchemy converts it."""
        return {
            name: value if convert is None or value is None else convert(value)
            for (name, convert), value in zip(self.columns, row, strict=True)
        }


class LoopReader:
    """One read-only connection to a SQLite file, serving one thread (see the module doc)."""

    def __init__(self, database: str, dialect: Dialect) -> None:
        self._uri = Path(database).resolve().as_uri() + "?mode=rw"  # the store's: never created
        self._dialect = dialect
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._thread: int | None = None
        self._prepared: dict[int, tuple[Select[Any], Prepared]] = {}
        self.statements = 0
        """Statements run here so far (what a test counts beside the engines' own)."""

    def rows(
        self, statement: Select[Any], params: Mapping[str, Any]
    ) -> list[dict[str, Any]] | None:
        """The rows of ``statement`` (every one: the read ends with it), or None when this
        thread is not the one served: read through the engine.
        Raises :class:`sqlite3.Error` as the driver does (the connection is then dropped and
        opened again by the next read)."""
        me = threading.get_ident()
        with self._lock:  # never contended: one thread passes this point
            if self._thread not in (None, me):
                return None
            self._thread = me
            prepared = self._prepared_of(statement)
            try:
                conn = self._conn or self._open()
                found = conn.execute(prepared.sql, [params[n] for n in prepared.order]).fetchall()
            except sqlite3.Error:
                self._drop()
                raise
            self.statements += 1
        return [prepared.mapping(row) for row in found]

    def close(self) -> None:
        """Close the connection (as an engine's ``dispose`` closes its pool's: a later read
        opens it again)."""
        with self._lock:
            self._drop()

    def _prepared_of(self, statement: Select[Any]) -> Prepared:
        known = self._prepared.get(id(statement))
        if known is None or known[0] is not statement:
            known = self._prepared[id(statement)] = (statement, Prepared(statement, self._dialect))
        return known[1]

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
