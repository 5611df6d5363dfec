"""A batch of new settlements into PostgreSQL in one statement, and their stored ``seq``s.

``POST /v1/settlements/batch`` inserts up to 1,000 rows. Through SQLAlchemy's executemany
each row's 25 parameters went through the column types' bind processors and psycopg sent
1,000 ``Bind``/``Execute`` messages, and a second statement read the ``seq`` each row got
(its ``IN`` list of 1,000 bound parameters expanded by SQLAlchemy): about a third of the
daemon's CPU for a batch. Here each column is one array parameter (psycopg adapts a list in
C), ``unnest`` turns the arrays back into rows, and ``RETURNING`` answers the ``seq`` of
each: one statement, one round trip, the rows checked by the same table constraints (a
repeated (chain, tx hash, owner) still raises the unique violation the caller retries on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import JSON, Connection, Dialect

from watcher.store import schema as s
from watcher.store.json_text import json_text

_SQL: dict[tuple[str, ...], tuple[str, tuple[bool, ...]]] = {}
"""The statement for a tuple of columns, and which of them are JSON (encoded here)."""


def _statement(dialect: Dialect, columns: tuple[str, ...]) -> tuple[str, tuple[bool, ...]]:
    """``INSERT … SELECT * FROM unnest(%s::type[], …) RETURNING settlement_id, seq`` for
    ``columns`` (built once per set of columns), and which columns are JSON."""
    found = _SQL.get(columns)
    if found is None:
        table = s.settlements
        types = [table.c[name].type.compile(dialect=dialect) for name in columns]
        arrays = ", ".join(f"%s::{kind}[]" for kind in types)
        names = ", ".join(f'"{name}"' for name in columns)
        sql = (
            f"INSERT INTO settlements ({names}) SELECT * FROM unnest({arrays}) "
            "RETURNING settlement_id, seq"
        )
        kinds = [table.c[name].type for name in columns]
        json_columns = tuple(isinstance(kind, JSON) for kind in kinds)
        # A JSON column storing None as SQL NULL would need its own case here.
        assert not any(isinstance(kind, JSON) and kind.none_as_null for kind in kinds)
        found = _SQL[columns] = (sql, json_columns)
    return found


def insert_unnest(conn: Connection, values: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Insert ``values`` (rows of the same keys, one ``settlement_id`` each) into
    settlements in one statement; the ``seq`` each got, by settlement id. A JSON column's
    values are encoded as the engine's serializer encodes them, None too (JSON ``null``, as
    SQLAlchemy's JSON type stores it: a batch's row is the same as a single
    registration's)."""
    columns = tuple(values[0])
    sql, is_json = _statement(conn.dialect, columns)
    arrays = [
        array_literal([row[name] for row in values], encode)
        for name, encode in zip(columns, is_json, strict=True)
    ]
    rows = conn.exec_driver_sql(sql, tuple(arrays)).all()
    return {settlement_id: seq for settlement_id, seq in rows}


def array_literal(column: Sequence[Any], is_json: bool = False) -> str:
    """``column`` (str, int, bool or None values; JSON documents when ``is_json``, None
    among them written as JSON ``null``) as a
    PostgreSQL array literal, ``{"a","b\\"c",NULL}``: psycopg's list adapter is Python,
    an element at a time, and was a quarter of a batch's CPU; one string is adapted at
    once and PostgreSQL parses it. Every text element is quoted, its backslashes and
    double quotes escaped (the literal's only special characters inside quotes)."""
    parts: list[str] = []
    append = parts.append
    for value in column:
        if is_json:
            append(_quoted(json_text(value)))
        elif value is None:
            append("NULL")
        elif value is True:
            append("t")
        elif value is False:
            append("f")
        elif isinstance(value, int):
            append(str(value))
        elif isinstance(value, str):
            append(_quoted(value))
        else:
            raise TypeError(f"no array literal for {type(value).__name__}")
    return "{" + ",".join(parts) + "}"


def _quoted(text: str) -> str:
    """``text`` as a quoted array element."""
    if "\\" in text or '"' in text:
        text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text + '"'


_SEQS = (
    "SELECT tx_hash, seq FROM settlements "
    "WHERE chain = %s AND owner = %s AND tx_hash = ANY(%s::varchar[])"
)


def stored_seqs(
    conn: Connection, keys: Sequence[tuple[str, str, str]]
) -> dict[tuple[str, str, str], int]:
    """The ``seq`` of each (chain, tx hash, owner) of ``keys`` that is stored: one statement
    per (chain, owner), its hashes one array parameter (through the unique index)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for chain, tx_hash, owner in keys:
        groups.setdefault((chain, owner), []).append(tx_hash)
    found: dict[tuple[str, str, str], int] = {}
    for (chain, owner), hashes in groups.items():
        for tx_hash, seq in conn.exec_driver_sql(_SEQS, (chain, owner, hashes)).all():
            found[(chain, tx_hash, owner)] = seq
    return found
