"""The store: every durable fact of the watcher, behind one small class.

Writes that belong together happen in one :class:`BlockTxn` (one database transaction):
a block's header, the head pointer, inclusion changes, verdicts, reorg and alert events. A
``kill -9`` at any instant leaves either all of a block's effects or none of them.

SQLite (the default) runs in WAL mode with ``synchronous=NORMAL``: a crashed *process* loses
no committed transaction (only a power loss could drop the last few). Write transactions
start with ``BEGIN IMMEDIATE`` so two writers queue on the busy timeout instead of failing
on a lock upgrade. PostgreSQL is used through psycopg 3 with the same tables.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import (
    Engine,
    and_,
    create_engine,
    delete,
    event,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.pool import NullPool

from chains.quorum import Anchor
from watcher.store import lease_store
from watcher.store import schema as s
from watcher.store.errors import (
    SchemaVersionUnknown,
    SettlementNotFound,
    StaleFencingToken,
    StoreError,
    StoreMismatch,
)
from watcher.store.outbox_store import NewDelivery, Outbox, cancel_undelivered, enqueue
from watcher.store.records import (
    ChainRecord,
    EventRecord,
    NewSettlement,
    ReorgRecord,
    SettlementRecord,
    WatchEntry,
    from_row,
)

IDLE_TXN_MS = 5000
"""PostgreSQL ends a session idle inside a transaction for this long (see _make_engine)."""

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


def normalise_url(url: str) -> str:
    """Map ``postgresql://`` to the psycopg 3 driver; leave other URLs as they are."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _make_engine(url: str, immediate: bool) -> Engine:
    if not url.startswith("sqlite"):
        engine = create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)

        @event.listens_for(engine, "connect")
        def _on_pg_connect(dbapi_conn: Any, _record: Any) -> None:
            # A process paused inside a transaction (SIGSTOP, a frozen VM) would hold its
            # locks, the lease row's among them, for ever: the server ends such a session,
            # so a standby can take over and the paused writer's commit fails.
            with dbapi_conn.cursor() as cursor:
                cursor.execute(f"SET idle_in_transaction_session_timeout = {IDLE_TXN_MS}")
            dbapi_conn.commit()

        return engine
    engine = create_engine(url, poolclass=NullPool if ":memory:" in url else None)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves, below
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=15000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


MIGRATION_LOCK = 0x66696E616C697479
"""PostgreSQL advisory lock key ("finality") taken while migrating."""


class Store:
    """Durable state of the watcher. Thread-safe: each call uses its own connection."""

    def __init__(self, url: str) -> None:
        self.url = url
        driver_url = normalise_url(url)
        try:
            self._writer = _make_engine(driver_url, immediate=True)
            self._reader = (
                _make_engine(driver_url, immediate=False)
                if driver_url.startswith("sqlite")
                else self._writer
            )
        except Exception as exc:  # SQLAlchemy raises several types for a bad URL
            raise StoreError(f"store url {url!r}: {exc}") from exc
        self.dialect = self._writer.dialect.name

    @classmethod
    def open(cls, url: str) -> Store:
        """Connect and bring the schema up to date; refuse a schema from a newer version."""
        store = cls(url)
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

    # -- schema --------------------------------------------------------------------------

    def migrate(self) -> None:
        """Apply pending migrations (Alembic); raise if the database is ahead of this code."""
        cfg = AlembicConfig()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        known = {rev.revision for rev in ScriptDirectory.from_config(cfg).walk_revisions()}
        try:
            with self._writer.begin() as conn:
                if self.dialect == "postgresql":
                    # Several instances started together on a fresh database would each create
                    # alembic's table and the schema; one would fail. The lock (held until
                    # this transaction ends) lets one migrate while the others wait, then
                    # find the schema current.
                    conn.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK}
                    )
                current = MigrationContext.configure(conn).get_current_heads()
                unknown = [rev for rev in current if rev not in known]
                if unknown:
                    raise SchemaVersionUnknown(self.url, unknown[0])
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except OperationalError as exc:
            raise StoreError(f"store {self.url}: cannot open: {exc.orig}") from exc

    def revision(self) -> str | None:
        """The schema revision the database is at."""
        with self._reader.connect() as conn:
            heads = MigrationContext.configure(conn).get_current_heads()
        return heads[0] if heads else None

    # -- chains --------------------------------------------------------------------------

    def ensure_chain(self, name: str, chain_id: int, now: int) -> ChainRecord:
        """Create the chain's row, or check that the stored one has the same chain id."""
        with self._writer.begin() as conn:
            row = conn.execute(select(s.chains).where(s.chains.c.name == name)).mappings().first()
            if row is None:
                conn.execute(insert(s.chains).values(name=name, chain_id=chain_id, updated_at=now))
                row = conn.execute(select(s.chains).where(s.chains.c.name == name)).mappings().one()
            elif row["chain_id"] != chain_id:
                raise StoreMismatch(
                    f"chain {name!r} is stored with chain id {row['chain_id']}, but the config "
                    f"says {chain_id}; use another name or another store"
                )
            return from_row(ChainRecord, row)

    def chain(self, name: str) -> ChainRecord | None:
        """Stored position of ``name``."""
        with self._reader.connect() as conn:
            row = conn.execute(select(s.chains).where(s.chains.c.name == name)).mappings().first()
        return None if row is None else from_row(ChainRecord, row)

    def chains(self) -> dict[str, ChainRecord]:
        """Stored position of every chain, by name: the head each chain's owner recorded in
        its last block transaction. Views read this, not an instance's own tracker, so a
        standby answers with the same head and depth as the owner."""
        with self._reader.connect() as conn:
            rows = conn.execute(select(s.chains)).mappings().all()
        return {row["name"]: from_row(ChainRecord, row) for row in rows}

    def headers(self, chain: str) -> list[tuple[int, str, str, int]]:
        """The stored header window: (number, hash, parent hash, timestamp), ascending."""
        h = s.headers
        with self._reader.connect() as conn:
            rows = conn.execute(
                select(h.c.number, h.c.hash, h.c.parent_hash, h.c.timestamp)
                .where(h.c.chain == chain)
                .order_by(h.c.number)
            ).all()
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def compact_headers(
        self, chain: str, first: int, last: int
    ) -> list[tuple[int, str, str, bytes | None]]:
        """Stored headers ``first..last`` of ``chain``: (number, hash, parent hash, compact
        fields or None), ascending; heights outside the window are simply absent."""
        h = s.headers
        with self._reader.connect() as conn:
            rows = conn.execute(
                select(h.c.number, h.c.hash, h.c.parent_hash, h.c.compact)
                .where(h.c.chain == chain, h.c.number >= first, h.c.number <= last)
                .order_by(h.c.number)
            ).all()
        return [(r[0], r[1], r[2], None if r[3] is None else bytes(r[3])) for r in rows]

    # -- settlements ---------------------------------------------------------------------

    def register(self, new: NewSettlement) -> tuple[SettlementRecord, bool]:
        """Insert a settlement; if (chain, tx hash) exists, return the stored one and False."""
        try:
            with self._writer.begin() as conn:
                conn.execute(insert(s.settlements).values(**_settlement_values(new)))
        except IntegrityError:
            return self.settlement_by_tx(new.chain, new.tx_hash), False
        return self.settlement(new.settlement_id), True

    def register_many(self, news: Sequence[NewSettlement]) -> None:
        """Insert many new settlements in one transaction (a bulk import).

        All or nothing: one already registered (chain, tx hash) rejects the whole batch
        with :class:`StoreError` naming the conflict.
        """
        try:
            with self._writer.begin() as conn:
                conn.execute(insert(s.settlements), [_settlement_values(n) for n in news])
        except IntegrityError as exc:
            raise StoreError(f"bulk registration rejected, nothing stored: {exc.orig}") from exc

    def settlement(self, settlement_id: str) -> SettlementRecord:
        """One settlement by id; raises :class:`SettlementNotFound`."""
        with self._reader.connect() as conn:
            row = (
                conn.execute(
                    select(s.settlements).where(s.settlements.c.settlement_id == settlement_id)
                )
                .mappings()
                .first()
            )
        if row is None:
            raise SettlementNotFound(settlement_id)
        return from_row(SettlementRecord, row)

    def settlement_by_tx(self, chain: str, tx_hash: str) -> SettlementRecord:
        """One settlement by chain and tx hash; raises :class:`SettlementNotFound`."""
        t = s.settlements
        with self._reader.connect() as conn:
            row = (
                conn.execute(select(t).where(t.c.chain == chain, t.c.tx_hash == tx_hash))
                .mappings()
                .first()
            )
        if row is None:
            raise SettlementNotFound(f"{chain}/{tx_hash}")
        return from_row(SettlementRecord, row)

    def watch_entries(self, chain: str, after_seq: int = 0) -> list[WatchEntry]:
        """Watched settlements of ``chain`` inserted after ``after_seq``, in order."""
        t = s.settlements
        with self._reader.connect() as conn:
            rows = (
                conn.execute(
                    select(
                        t.c.seq,
                        t.c.settlement_id,
                        t.c.tx_hash,
                        t.c.sender,
                        t.c.nonce,
                        t.c.block_number,
                    )
                    .where(t.c.chain == chain, t.c.watching.is_(True), t.c.seq > after_seq)
                    .order_by(t.c.seq)
                )
                .mappings()
                .all()
            )
        return [from_row(WatchEntry, r) for r in rows]

    def due_probes(self, chain: str, now: int, limit: int) -> list[SettlementRecord]:
        """Watched, not included, sender unknown (or given at registration and never
        probed: found in the tracker's blocks without a call), probe time reached: oldest
        first."""
        t = s.settlements
        with self._reader.connect() as conn:
            rows = (
                conn.execute(
                    select(t)
                    .where(
                        t.c.chain == chain,
                        t.c.watching.is_(True),
                        t.c.block_number.is_(None),
                        or_(t.c.sender.is_(None), t.c.probe_count == 0),
                        t.c.next_probe_at <= now,
                    )
                    .order_by(t.c.next_probe_at)
                    .limit(limit)
                )
                .mappings()
                .all()
            )
        return [from_row(SettlementRecord, r) for r in rows]

    def verdict_counts(self) -> dict[tuple[str, str], int]:
        """Number of settlements by (chain, verdict)."""
        t = s.settlements
        with self._reader.connect() as conn:
            rows = conn.execute(
                select(t.c.chain, t.c.verdict, func.count()).group_by(t.c.chain, t.c.verdict)
            ).all()
        return {(r[0], r[1]): r[2] for r in rows}

    def reorgs(self, chain: str | None = None, limit: int = 100) -> list[ReorgRecord]:
        """Most recent reorgs first."""
        t = s.reorgs
        query = select(t).order_by(t.c.id.desc()).limit(limit)
        if chain is not None:
            query = query.where(t.c.chain == chain)
        with self._reader.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [from_row(ReorgRecord, r) for r in rows]

    def events(
        self, settlement_id: str | None = None, after_id: int = 0, limit: int = 1000
    ) -> list[EventRecord]:
        """Events in order, optionally for one settlement."""
        t = s.events
        query = select(t).where(t.c.id > after_id).order_by(t.c.id).limit(limit)
        if settlement_id is not None:
            query = query.where(t.c.settlement_id == settlement_id)
        with self._reader.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [from_row(EventRecord, r) for r in rows]

    def finality_anchors(self, chain: str, head: int, finalized: int | None) -> list[Anchor]:
        """Watched settlements of ``chain`` that ``head`` (or ``finalized``) could make
        terminal: what the finality gate is asked about before a block's transaction."""
        t = s.settlements
        reasons = [t.c.confirm_height <= head]
        if finalized is not None:
            reasons.append(
                and_(
                    t.c.finality_mode != "depth",
                    or_(t.c.block_number <= finalized, t.c.replaced_block_number <= finalized),
                )
            )
        with self._reader.connect() as conn:
            rows = conn.execute(
                select(
                    t.c.settlement_id,
                    t.c.block_number,
                    t.c.block_hash,
                    t.c.replaced_block_number,
                    t.c.replaced_block_hash,
                    t.c.confirm_height,
                ).where(t.c.chain == chain, t.c.watching.is_(True), or_(*reasons))
            ).all()
        return [
            Anchor(
                settlement_id=r[0],
                block_number=r[3] if r[3] is not None else r[1],
                block_hash=r[4] if r[4] is not None else r[2],
                confirm_height=r[5],
            )
            for r in rows
            if (r[1] is not None or r[3] is not None)
        ]

    def anchored_above(
        self, chain: str, number: int
    ) -> list[tuple[str, str, str | None, int | None]]:
        """``(tx hash, settlement id, sender, nonce)`` of every settlement of ``chain`` whose
        inclusion or replacing tx sits above ``number`` (any verdict): the ones a reorg there
        touches (sender and nonce are None when the tx was never seen)."""
        t = s.settlements
        with self._reader.connect() as conn:
            rows = conn.execute(
                select(t.c.tx_hash, t.c.settlement_id, t.c.sender, t.c.nonce).where(
                    t.c.chain == chain,
                    or_(t.c.block_number > number, t.c.replaced_block_number > number),
                )
            ).all()
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def recorded_blocks(self, chain: str, below: int, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` distinct ``(number, hash)`` of blocks below ``below`` that a
        settlement of ``chain`` is anchored in (inclusion or replacing tx), highest first:
        what the head tracker checks when a reorg replaced its whole header window."""
        t = s.settlements
        found: set[tuple[int, str]] = set()
        with self._reader.connect() as conn:
            for number, block_hash in (
                (t.c.block_number, t.c.block_hash),
                (t.c.replaced_block_number, t.c.replaced_block_hash),
            ):
                rows = conn.execute(
                    select(number, block_hash)
                    .where(t.c.chain == chain, number < below, block_hash.is_not(None))
                    .group_by(number, block_hash)
                    .order_by(number.desc())
                    .limit(limit)
                ).all()
                found.update((int(r[0]), str(r[1])) for r in rows)
        return sorted(found, reverse=True)[:limit]

    def unanchored_watching(self, chain: str) -> list[SettlementRecord]:
        """Watched settlements of ``chain`` not included anywhere we know of: what is looked
        up by hash again after a rebase (their txs may sit below the window, never scanned)."""
        t = s.settlements
        with self._reader.connect() as conn:
            rows = (
                conn.execute(
                    select(t).where(
                        t.c.chain == chain,
                        t.c.watching.is_(True),
                        t.c.block_number.is_(None),
                        t.c.replaced_block_number.is_(None),
                    )
                )
                .mappings()
                .all()
            )
        return [from_row(SettlementRecord, r) for r in rows]

    def any_deadline_due(self, chain: str, now: int, late_watch_ms: int) -> bool:
        """Whether a watched settlement of ``chain`` has a time-only change due."""
        t = s.settlements
        with self._reader.connect() as conn:
            row = conn.execute(
                select(t.c.seq)
                .where(
                    t.c.chain == chain,
                    t.c.watching.is_(True),
                    or_(*_deadline_reasons(now, late_watch_ms)),
                )
                .limit(1)
            ).first()
        return row is not None

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
    def writer(self) -> Engine:
        """The engine writes go through (the lease and handoff helpers use it)."""
        return self._writer

    @property
    def reader(self) -> Engine:
        """The engine reads go through."""
        return self._reader

    def outbox(self) -> Outbox:
        """The delivery outbox over this store's connections (see ``outbox_store``)."""
        return Outbox(self._writer, self._reader)


def _settlement_values(new: NewSettlement) -> dict[str, Any]:
    """The row a registration inserts."""
    return {
        "settlement_id": new.settlement_id,
        "chain": new.chain,
        "tx_hash": new.tx_hash,
        "required_confirmations": new.required_confirmations,
        "finality_mode": new.finality_mode,
        "timeout_ms": new.timeout_ms,
        "initiated_at": new.initiated_at,
        "deadline": new.deadline,
        "verdict": new.decision["verdict"],
        "watching": True,
        "reorg_count": 0,
        "digest": new.digest,
        "decision": new.decision,
        "dependent_state": new.dependent_state,
        "commit_url": new.commit_url,
        "next_probe_at": new.initiated_at,
        "probe_count": 0,
        "created_at": new.initiated_at,
        "updated_at": new.initiated_at,
        "provisional": new.provisional,
        "sender": new.sender,
        "nonce": new.nonce,
        "raw_tx": new.raw_tx,
    }


def _deadline_reasons(now: int, late_watch_ms: int) -> list[Any]:
    t = s.settlements
    return [
        and_(t.c.verdict == "AWAITING_FINALITY", t.c.deadline <= now),
        and_(t.c.verdict == "TIMEOUT_TREATED_AS_FAILURE", t.c.deadline <= now - late_watch_ms),
    ]


class BlockTxn:
    """The writes of one unit of work (usually one block), inside one transaction."""

    def __init__(self, conn: Connection, chain: str, now: int) -> None:
        self.conn = conn
        self.chain = chain
        self.now = now

    # -- head ----------------------------------------------------------------------------

    def put_header(
        self,
        number: int,
        block_hash: str,
        parent_hash: str,
        timestamp: int,
        keep: int,
        compact: bytes | None = None,
    ) -> None:
        """Store a new head header, prune the window below ``keep`` headers, move the head.

        ``compact``: every field of the header's hash (chains/block_facts.py), kept so that
        receipts read their header chain from here."""
        h = s.headers
        self.conn.execute(delete(h).where(h.c.chain == self.chain, h.c.number >= number))
        self.conn.execute(
            insert(h).values(
                chain=self.chain,
                number=number,
                hash=block_hash,
                parent_hash=parent_hash,
                timestamp=timestamp,
                compact=compact,
            )
        )
        self.conn.execute(delete(h).where(h.c.chain == self.chain, h.c.number <= number - keep))
        self.conn.execute(
            update(s.chains)
            .where(s.chains.c.name == self.chain)
            .values(head_number=number, head_hash=block_hash, updated_at=self.now)
        )

    def rewind(self, ancestor_number: int) -> None:
        """Drop stored headers above the common ancestor of a reorg."""
        h = s.headers
        self.conn.execute(delete(h).where(h.c.chain == self.chain, h.c.number > ancestor_number))

    def set_finalized(self, number: int) -> None:
        """Remember the chain's latest ``finalized`` block."""
        self.conn.execute(
            update(s.chains).where(s.chains.c.name == self.chain).values(finalized_number=number)
        )

    def record_reorg(self, **values: Any) -> int:
        """Insert a reorg event; returns its id."""
        result = self.conn.execute(
            insert(s.reorgs).values(chain=self.chain, detected_at=self.now, **values)
        )
        key = result.inserted_primary_key
        assert key is not None
        return int(key[0])

    # -- settlements ---------------------------------------------------------------------

    def _settlements(self, *conditions: Any) -> list[SettlementRecord]:
        t = s.settlements
        rows = (
            self.conn.execute(
                select(t).where(t.c.chain == self.chain, *conditions).order_by(t.c.seq)
            )
            .mappings()
            .all()
        )
        return [from_row(SettlementRecord, r) for r in rows]

    def by_ids(self, ids: Sequence[str]) -> list[SettlementRecord]:
        """Settlements of this chain with the given ids."""
        if not ids:
            return []
        return self._settlements(s.settlements.c.settlement_id.in_(list(ids)))

    def anchored_above(self, number: int) -> list[SettlementRecord]:
        """Settlements whose inclusion or replacing tx sits above ``number`` (any verdict)."""
        t = s.settlements
        return self._settlements(or_(t.c.block_number > number, t.c.replaced_block_number > number))

    def anchored_in(self, block_hashes: Sequence[str]) -> list[SettlementRecord]:
        """Settlements whose inclusion or replacing tx sits in one of ``block_hashes``."""
        if not block_hashes:
            return []
        t = s.settlements
        hashes = list(block_hashes)
        return self._settlements(
            or_(t.c.block_hash.in_(hashes), t.c.replaced_block_hash.in_(hashes))
        )

    def due(self, head: int, finalized: int | None, late_watch_ms: int) -> list[SettlementRecord]:
        """Watched settlements a verdict may change for: depth reached, finalized, deadline
        passed while awaiting, or the late-finality watch of a timed-out one ended."""
        t = s.settlements
        reasons = [t.c.confirm_height <= head, *_deadline_reasons(self.now, late_watch_ms)]
        if finalized is not None:
            reasons.append(
                and_(
                    t.c.finality_mode != "depth",
                    or_(t.c.block_number <= finalized, t.c.replaced_block_number <= finalized),
                )
            )
        return self._settlements(t.c.watching.is_(True), or_(*reasons))

    def _update(self, settlement_id: str, **values: Any) -> None:
        t = s.settlements
        self.conn.execute(
            update(t)
            .where(t.c.settlement_id == settlement_id)
            .values(updated_at=self.now, **values)
        )

    def set_inclusion(
        self,
        record: SettlementRecord,
        block_number: int,
        block_hash: str,
        tx_index: int,
        status: int,
        sender: str | None,
        nonce: int | None,
    ) -> None:
        """The watched tx is in ``block_hash`` with ``status``."""
        self._update(
            record.settlement_id,
            block_number=block_number,
            block_hash=block_hash,
            tx_index=tx_index,
            receipt_status=status,
            sender=sender or record.sender,
            nonce=record.nonce if nonce is None else nonce,
            confirm_height=block_number + record.required_confirmations - 1,
        )

    def set_replacement(
        self, record: SettlementRecord, replaced_by: str, block_number: int, block_hash: str
    ) -> None:
        """Another tx with the same sender and nonce is in ``block_hash``."""
        self._update(
            record.settlement_id,
            replaced_by=replaced_by,
            replaced_block_number=block_number,
            replaced_block_hash=block_hash,
            confirm_height=block_number + record.required_confirmations - 1,
        )

    def clear_anchor(self, record: SettlementRecord) -> None:
        """A reorg removed the inclusion (or the replacing tx): back to not included."""
        self._update(
            record.settlement_id,
            block_number=None,
            block_hash=None,
            tx_index=None,
            receipt_status=None,
            replaced_by=None,
            replaced_block_number=None,
            replaced_block_hash=None,
            confirm_height=None,
            reorg_count=record.reorg_count + 1,
        )

    def set_sender(
        self, record: SettlementRecord, sender: str, nonce: int, raw_tx: str | None = None
    ) -> None:
        """Remember who sent the watched tx, its nonce and its signed bytes (seen pending)."""
        self._update(
            record.settlement_id, sender=sender, nonce=nonce, raw_tx=raw_tx or record.raw_tx
        )

    def set_probe(self, record: SettlementRecord, next_probe_at: int) -> None:
        """When to look the tx up by hash again."""
        self._update(
            record.settlement_id, next_probe_at=next_probe_at, probe_count=record.probe_count + 1
        )

    def save_decision(
        self,
        record: SettlementRecord,
        verdict: str,
        digest: str,
        decision: dict[str, Any],
        watching: bool,
        terminal: bool,
    ) -> None:
        """Store a new decision for the settlement."""
        self._update(
            record.settlement_id,
            verdict=verdict,
            digest=digest,
            decision=decision,
            watching=watching,
            terminal_at=(record.terminal_at or self.now) if terminal else None,
        )

    def stop_watching(self, record: SettlementRecord) -> None:
        """No longer follow this settlement (late-finality horizon passed, or reported)."""
        self._update(record.settlement_id, watching=False)

    def add_event(
        self, kind: str, severity: str, payload: dict[str, Any], settlement_id: str | None = None
    ) -> None:
        """Record an alert or lifecycle event."""
        self.conn.execute(
            insert(s.events).values(
                chain=self.chain,
                settlement_id=settlement_id,
                kind=kind,
                severity=severity,
                payload=payload,
                created_at=self.now,
            )
        )

    # -- appended for the outbox (issue 4) -------------------------------------------------

    def record_event(
        self, kind: str, severity: str, payload: dict[str, Any], settlement_id: str | None = None
    ) -> int:
        """Like :meth:`add_event`, and return the event's id (deliveries refer to it)."""
        result = self.conn.execute(
            insert(s.events).values(
                chain=self.chain,
                settlement_id=settlement_id,
                kind=kind,
                severity=severity,
                payload=payload,
                created_at=self.now,
            )
        )
        key = result.inserted_primary_key
        assert key is not None
        return int(key[0])

    def enqueue_delivery(self, new: NewDelivery) -> bool:
        """Put a delivery in the outbox, in this transaction; False if its key exists."""
        return enqueue(self.conn, new, self.now)

    def cancel_deliveries(self, settlement_id: str, kinds: Sequence[str], reason: str) -> int:
        """Cancel the settlement's undelivered commit-channel rows of ``kinds``."""
        return cancel_undelivered(self.conn, settlement_id, kinds, self.now, reason)

    def provisional_in_progress(self) -> list[SettlementRecord]:
        """Included, still awaiting, provisional settlements with a commit URL."""
        t = s.settlements
        return self._settlements(
            t.c.watching.is_(True),
            t.c.confirm_height.is_not(None),
            t.c.block_number.is_not(None),
            t.c.provisional.is_(True),
            t.c.verdict == "AWAITING_FINALITY",
            t.c.commit_url.is_not(None),
        )
