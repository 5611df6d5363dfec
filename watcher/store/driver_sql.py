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

A block's batches take the same way (:func:`insert_many`, :meth:`DriverStatement.run_many`):
a block of 1,000 deposits inserts 1,000 settlement, spec, deposit and transfer rows and
their events, then updates 1,000 decisions, and SQLAlchemy's per-row parameter processing
of those ``executemany`` cost about a third of what SQLite's own work did.

A driver error leaves as SQLAlchemy's own wrapped error (``DBAPIError.instance``), so the
store's edge maps it as any other: a conflict, or the store unavailable.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping, Sequence
from operator import itemgetter
from typing import Any, cast

import orjson
from sqlalchemy import JSON, Table, bindparam, insert
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
        self.defaults = {
            name: value if (to_driver := self.binds.get(name)) is None else to_driver(value)
            for name, bind in compiled.binds.items()
            if not bind.required and (value := bind.effective_value) is not None
        }
        """The values compiled in (a condition's literal: a verdict, a finality mode), as
        the driver takes them: run with every call's own."""
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
        if self.defaults:
            params = {**self.defaults, **params}
        if self.order:
            params = [params[name] for name in self.order]
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(self.sql, params)
        except self._error as exc:
            raise DBAPIError.instance(self.sql, params, exc, self._error) from exc
        return cursor

    def run_many(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Execute once per row of ``rows`` (each with every bind name) in one
        ``executemany`` on ``conn``'s driver connection, in its transaction: no execution
        context per row, the parameters converted as :meth:`run` converts them."""
        if not rows:
            return
        binds, order = self.binds, self.order
        names = tuple(order or rows[0])
        converts = [(at, convert) for at, name in enumerate(names) if (convert := binds.get(name))]
        # A row's values taken in one C call (itemgetter), then only the columns with a
        # conversion (JSON, on SQLite) converted: a block of 1,000 deposits binds ~75,000
        # values, and a generator per row, converting each, was most of its Python time.
        take = itemgetter(*names)
        params: list[Any] = [take(row) for row in rows]
        if len(names) == 1:
            params = [(value,) for value in params]
        if converts:
            for i, values in enumerate(params):
                values = list(values)
                for at, convert in converts:
                    values[at] = convert(values[at])
                params[i] = values
        if not order:
            params = [dict(zip(names, values, strict=True)) for values in params]
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.executemany(self.sql, params)
        except self._error as exc:
            raise DBAPIError.instance(self.sql, params[:1], exc, self._error) from exc
        finally:
            cursor.close()

    def rows(self, conn: Connection, values: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Every row of a query by column name, converted as SQLAlchemy converts it."""
        cursor = self.run(conn, values)
        try:
            found = cursor.fetchall()
        finally:
            cursor.close()
        columns = self.columns
        return [
            {
                name: value if convert is None or value is None else convert(value)
                for (name, convert), value in zip(columns, row, strict=True)
            }
            for row in found
        ]

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


_COMPILED: dict[tuple[Hashable, str, str], DriverStatement] = {}
"""Statements compiled once per (key, dialect, driver): a block's writes reuse them."""


def statement(
    conn: Connection, key: Hashable, build: Callable[[], ClauseElement]
) -> DriverStatement:
    """The statement ``build()`` names by ``key``, compiled for ``conn``'s dialect at its first
    use (``key`` must name the statement and nothing else: the same key, the same SQL)."""
    dialect = conn.dialect
    at = (key, dialect.name, dialect.driver)
    found = _COMPILED.get(at)
    if found is None:
        found = _COMPILED[at] = DriverStatement(build(), dialect)
    return found


def insert_many(conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert ``rows`` (each with the same keys: column names) into ``table`` in one
    ``executemany`` on the driver's cursor, the values converted by the columns' types."""
    if not rows:
        return
    columns = tuple(rows[0])

    def build() -> ClauseElement:
        return insert(table).values({c: bindparam(c, type_=table.c[c].type) for c in columns})

    statement(conn, ("insert", table.name, columns), build).run_many(conn, rows)
