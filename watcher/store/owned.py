"""Reading one row a caller owns: the rule every per-caller resource (subscriptions,
invoices) applies, written once.

A caller sees only its own rows: with ``owner`` given, a row of another caller is as absent
as an unknown id (the API answers 404 for both, so ids cannot be probed). ``owner`` None is
the daemon's own read (the engine, the CLI on the store), which sees every row.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, RowMapping, Table, select

from watcher.store.db import Db


def owned_row(
    reader: Db, table: Table, key: Column[Any], value: str, owner: str | None
) -> RowMapping | None:
    """The row of ``table`` whose ``key`` is ``value`` (``owner``'s when given), or None."""
    query = select(table).where(key == value)
    if owner is not None:
        query = query.where(table.c.owner == owner)
    with reader.connect() as conn:
        return conn.execute(query).mappings().first()
