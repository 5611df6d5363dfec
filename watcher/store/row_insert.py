"""New settlement rows written as the driver takes them: one compiled positional ``INSERT``
for a single registration and for a batch alike.

Through SQLAlchemy's ``insert`` each row's parameters are built and bound by the statement's
execution machinery on every call; a batch spent a tenth of its time there, and a single
``POST /v1/settlements`` more than on SQLite's own work. Here the statement is compiled
once per dialect and set of columns, and the values go to the driver as tuples through the
column types' own bind processors (JSON encoded as the engine encodes it, booleans as the
dialect stores them): the same row as SQLAlchemy's ``insert`` writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, Dialect

from watcher.store import schema as s

_Compiled = tuple[str, tuple[str, ...], tuple[Any, ...]]
_COMPILED: dict[tuple[str, tuple[str, ...]], _Compiled] = {}
"""The settlements INSERT by dialect and columns: its text, its parameters' column names in
order, and each one's bind processor (or None)."""


def insert_rows(conn: Connection, values: Sequence[dict[str, Any]]) -> int | None:
    """INSERT ``values`` (rows of the same keys) into settlements: on SQLite the compiled
    positional statement, one executemany (module doc); elsewhere SQLAlchemy's executemany
    (PostgreSQL's batch has its own single statement: watcher/store/pg_batch.py). A
    repeated (chain, tx hash, owner) raises the unique violation, as any insert does.
    Returns the ``seq`` of a single row inserted on SQLite (its rowid), else None."""
    if conn.dialect.name != "sqlite" or conn.dialect.paramstyle != "qmark":
        conn.execute(s.settlements.insert(), list(values))
        return None
    sql, names, processors = _compiled_insert(conn.dialect, tuple(values[0]))
    pick = itemgetter(*names)
    rows = [list(pick(v)) for v in values]
    for i, process in enumerate(processors):
        if process is not None:  # a column at a time: JSON, booleans
            for row in rows:
                row[i] = process(row[i])
    result = conn.exec_driver_sql(sql, [tuple(row) for row in rows])  # one: a plain execute
    return result.lastrowid if len(rows) == 1 else None


def _compiled_insert(dialect: Dialect, columns: tuple[str, ...]) -> _Compiled:
    """The positional INSERT of ``columns`` for ``dialect`` (compiled once)."""
    key = (dialect.name, columns)
    found = _COMPILED.get(key)
    if found is None:
        compiled = s.settlements.insert().compile(dialect=dialect, column_keys=list(columns))
        names = tuple(compiled.positiontup or ())
        types = [dialect.type_descriptor(s.settlements.c[name].type) for name in names]
        processors = tuple(kind.bind_processor(dialect) for kind in types)
        found = _COMPILED[key] = (compiled.string, names, processors)
    return found
