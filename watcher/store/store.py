"""The store: every durable fact of the watcher, behind one small class.

:class:`Store` opens the database (``watcher/store/db.py``, the edge where SQLAlchemy
errors become store errors), migrates it, and gathers the queries of each table group
(chains, settlements, events: one module each) plus the parts with state of their own: the
delivery outbox, the receipts, the webhook inbox, the leases. Writes that belong to one
block happen in one :class:`~watcher.store.block_txn.BlockTxn`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from watcher.store import lease_store, migrate
from watcher.store.block_txn import BlockTxn
from watcher.store.chains_store import ChainQueries
from watcher.store.db import Db, open_dbs
from watcher.store.deposits_store import DepositQueries
from watcher.store.errors import StaleFencingToken
from watcher.store.events_store import EventQueries
from watcher.store.inbox_store import Inbox
from watcher.store.invoices_store import InvoiceQueries
from watcher.store.outbox_store import Outbox
from watcher.store.payments_store import PaymentQueries
from watcher.store.settlements_store import SettlementQueries
from watcher.store.workflows_store import WorkflowStore

__all__ = ["BlockTxn", "Store"]


class Store(
    ChainQueries, SettlementQueries, EventQueries, PaymentQueries, DepositQueries, InvoiceQueries
):
    """Durable state of the watcher. Thread-safe: each call uses its own connection."""

    def __init__(self, url: str, instance_id: str | None = None) -> None:
        """``instance_id``: the handoff instance whose name PostgreSQL sessions carry (a
        successor ends a frozen owner's open transactions by it; ``db.session_name``)."""
        self.url = url
        self._writer, self._reader = open_dbs(url, instance_id)
        self.dialect = self._writer.dialect.name

    @classmethod
    def open(cls, url: str, instance_id: str | None = None) -> Store:
        """Connect and bring the schema up to date; refuse a schema from a newer version."""
        store = cls(url, instance_id)
        try:
            store.migrate()
        except BaseException:
            store.close()
            raise
        return store

    def close(self) -> None:
        """Release every connection."""
        self._writer.dispose()
        if self._reader is not self._writer:
            self._reader.dispose()

    def migrate(self) -> None:
        """Apply pending migrations (Alembic); raise if the database is ahead of this code."""
        migrate.migrate(self._writer, self.url)

    def revision(self) -> str | None:
        """The schema revision the database is at."""
        return migrate.revision(self._reader)

    def write_problem(self) -> str | None:
        """Why writes fail now, as a fixed phrase (None: the last write succeeded); see
        :meth:`watcher.store.db.Db.write_problem` (what ``/healthz`` reports)."""
        return self._writer.write_problem()

    @contextlib.contextmanager
    def block_txn(
        self, chain: str, now: int, fence: tuple[str, int] | None = None
    ) -> Iterator[BlockTxn]:
        """One write transaction for ``chain``: committed on exit, rolled back on error.

        ``fence`` is (owner, fencing token) of the lease the write is made under: checked
        first, in the same transaction, so a writer that lost its lease changes nothing; the
        refusal raises :class:`StaleFencingToken` and is recorded. None: unfenced (one
        instance alone, or a test).
        """
        try:
            with self._writer.begin() as conn:
                if fence is not None:
                    lease_store.check_fence(conn, chain, fence[0], fence[1])
                yield BlockTxn(conn, chain, now)
        except StaleFencingToken as exc:
            lease_store.record_rejection(self._writer, exc, now)
            raise

    @property
    def writer(self) -> Db:
        """Where writes go through (the lease and handoff helpers use it)."""
        return self._writer

    @property
    def reader(self) -> Db:
        """Where reads go through."""
        return self._reader

    def outbox(self) -> Outbox:
        """The delivery outbox over this store's connections (see ``outbox_store``)."""
        return Outbox(self._writer, self._reader)

    def inbox(self) -> Inbox:
        """The webhook inbox over this store's connections (see ``inbox_store``)."""
        return Inbox(self._writer, self._reader)

    def workflows(self) -> WorkflowStore:
        """Callers' workflows over this store's connections (see ``workflows_store``)."""
        return WorkflowStore(self._writer, self._reader)
