"""Statements compiled once for a dialect and run on the driver's own cursor, inside a
transaction the engine opened (:meth:`~watcher.store.db.Db.begin`).

Why: a workflow step write is three small statements (read the locked row, update it, record
the event), and SQLAlchemy's per-statement machinery (the execution context, the compiled
cache's key, the result wrapper, the listeners) cost several times what SQLite's answer
does; the group writer runs them one after another while holding the store's one writer,
on a core it shares with the API's event loop. Here a statement is compiled once, its SQL
text run on the driver connection the engine's transaction holds (same transaction, same
commit), its parameters converted by the dialect's own bind processors (the same stored
values as through the engine: JSON columns through the engine's serializer) and its result
columns by the dialect's result processors (the same Python values), JSON text read with
orjson where it can (the stdlib where orjson refuses: an integer past 64 bits, NaN).

A driver error leaves as SQLAlchemy's own wrapped error (``DBAPIError.instance``), so the
store's edge maps it as any other: a conflict, or the store unavailable.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, cast

import orjson
from sqlalchemy import JSON
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

Convert = Callable[[Any], Any]


def _json_value(text: Any) -> Any:
    """A JSON column's text as Python values, as the stdlib reads it (orjson: same values,
    a fraction of the time)."""
    if not isinstance(text, str | bytes):
        return text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


class DriverStatement:
    """One statement compiled for ``dialect``: its SQL text, its parameters' order and
    conversions, and its result columns' conversions. Every parameter is a named
    ``bindparam`` given to :meth:`run` (no literal values compiled in)."""

    def __init__(self, statement: ClauseElement, dialect: Dialect) -> None:
        compiled = cast(SQLCompiler, statement.compile(dialect=dialect))
        self.sql = str(compiled)
        self.order = tuple(compiled.positiontup or ())
        """Parameter names in order (SQLite's ``?``); empty for a named style (psycopg)."""
        self.binds: dict[str, Convert] = {}
        for name, bind in compiled.binds.items():
            convert = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if convert is not None:
                self.binds[name] = convert
        self.columns: tuple[tuple[str, Convert | None], ...] = tuple(
            (column.name, _result(column.type, dialect))
            for column in getattr(statement, "selected_columns", ())
        )
        self._error = dialect.loaded_dbapi.Error

    def run(self, conn: Connection, values: Mapping[str, Any]) -> Any:
        """Execute with ``values`` (by bind name) on ``conn``'s driver connection, in its
        transaction; the driver's cursor."""
        binds = self.binds
        params: Any = {
            name: value if (convert := binds.get(name)) is None else convert(value)
            for name, value in values.items()
        }
        if self.order:
            params = [params[name] for name in self.order]
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(self.sql, params)
        except self._error as exc:
            raise DBAPIError.instance(self.sql, params, exc, self._error) from exc
        return cursor

    def first(self, conn: Connection, values: Mapping[str, Any]) -> dict[str, Any] | None:
        """The first row of a query by column name (None: no row), converted as SQLAlchemy
        converts it."""
        cursor = self.run(conn, values)
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
        if row is None:
            return None
        return {
            name: value if convert is None or value is None else convert(value)
            for (name, convert), value in zip(self.columns, row, strict=True)
        }


def _result(kind: Any, dialect: Dialect) -> Convert | None:
    convert = kind.dialect_impl(dialect).result_processor(dialect, None)
    if convert is not None and isinstance(kind, JSON):
        return _json_value  # the stdlib's json.loads is the engine's deserializer here
    return convert  # type: ignore[no-any-return]
