"""Schema migrations (Alembic): bring a database up to this version, refuse a newer one."""

from __future__ import annotations

import logging
from pathlib import Path

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from watcher.store.db import Db, shown_url
from watcher.store.errors import SchemaVersionUnknown, StoreError

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"

log = logging.getLogger("finality.store")

MIGRATION_LOCK = 0x66696E616C697479
"""PostgreSQL advisory lock key ("finality") taken while migrating."""


def migrate(db: Db, url: str) -> None:
    """Apply pending migrations; raise :class:`SchemaVersionUnknown` if the database is
    ahead of this code, :class:`StoreError` if it cannot be opened."""
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    known = {rev.revision for rev in ScriptDirectory.from_config(cfg).walk_revisions()}
    try:
        with db.engine.begin() as conn:
            if db.dialect.name == "postgresql":
                # Several instances started together on a fresh database would each create
                # alembic's table and the schema; one would fail. The lock (held until
                # this transaction ends) lets one migrate while the others wait, then
                # find the schema current.
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
                # The session's idle-in-transaction limit (db.make_engine) is for a writer
                # paused mid-transaction; a migration pauses between statements as Alembic
                # imports each revision, which on a loaded machine took over that limit
                # and killed the migration half-way (it rolls back: nothing lost, but the
                # daemon could not start). This transaction only.
                conn.execute(text("SET LOCAL idle_in_transaction_session_timeout = 0"))
            current = MigrationContext.configure(conn).get_current_heads()
            unknown = [rev for rev in current if rev not in known]
            if unknown:
                raise SchemaVersionUnknown(shown_url(url), unknown[0])
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            after = MigrationContext.configure(conn).get_current_heads()
    except OperationalError as exc:
        raise StoreError(f"store {shown_url(url)}: cannot open: {exc.orig}") from exc
    _say_schema(current, after)


def _say_schema(before: tuple[str, ...], after: tuple[str, ...]) -> None:
    """One line for the operator when the schema changed (Alembic's own per-revision lines
    are at debug: ``finality run --log-level debug``)."""
    was, now = ",".join(before) or "empty", ",".join(after) or "empty"
    if before == after:
        log.debug("store: schema at %s, nothing to migrate", now)
    else:
        log.info("store: schema migrated from %s to %s", was, now)


def revision(db: Db) -> str | None:
    """The schema revision the database is at."""
    with db.connect() as conn:
        heads = MigrationContext.configure(conn).get_current_heads()
    return heads[0] if heads else None
