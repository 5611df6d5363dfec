"""The raw read on PostgreSQL (watcher/store/fast_read.py): a few asynchronous autocommit
psycopg connections, so a network round trip is awaited on the API's event loop, never
blocking it. Its own module because psycopg comes with the ``postgres`` extra only."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from sqlalchemy import URL
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import Select

from watcher.store.fast_read import PG_CONNECTIONS, Compiled, Listener


class PgRead:
    """A few asynchronous autocommit connections to PostgreSQL (see the module doc).

    They belong to the event loop that opened them: read from another loop (a test's
    ``asyncio.run`` each time), the old ones are closed and new ones opened."""

    def __init__(self, url: URL, dialect: Dialect) -> None:
        import psycopg  # the [postgres] extra: imported only for a PostgreSQL store

        self._psycopg = psycopg
        self.errors: tuple[type[Exception], ...] = (psycopg.Error,)
        self._conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._compiled = Compiled(dialect)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[Any] = []
        self._slots: asyncio.Semaphore | None = None
        self.statements = 0
        self.listeners: list[Listener] = []

    async def rows(self, statement: Select[Any], params: Mapping[str, Any]) -> list[dict[str, Any]]:
        prepared = self._compiled(statement)
        values = prepared.params(params)
        for listener in self.listeners:
            listener(prepared.sql, values)
        slots = self._slots_of(asyncio.get_running_loop())
        async with slots:
            conn = self._idle.pop() if self._idle else await self._open()
            try:
                cursor = await conn.execute(prepared.sql, values)
                found = await cursor.fetchall()
            except self._psycopg.Error:
                _finish(conn)
                raise
            self._idle.append(conn)
            self.statements += 1
        return [prepared.mapping(row) for row in found]

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            _finish(conn)

    def _slots_of(self, loop: asyncio.AbstractEventLoop) -> asyncio.Semaphore:
        if loop is not self._loop or self._slots is None:
            self.close()  # another loop's connections cannot serve this one
            self._loop, self._slots = loop, asyncio.Semaphore(PG_CONNECTIONS)
        return self._slots

    async def _open(self) -> Any:
        return await self._psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)


def _finish(conn: Any) -> None:
    """Close a psycopg connection without awaiting (its loop may be gone)."""
    conn.pgconn.finish()
