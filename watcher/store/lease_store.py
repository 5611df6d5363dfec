"""Leases with fencing tokens: who owns the processing of a chain (or a source) right now.

A lease row per name holds the owner, the time it lasts until, and a *fencing token* that
only ever grows: each change of owner increments it. Every processing write carries the
token it was started under; :func:`check_fence` verifies it inside the write's own
transaction, holding a ``FOR KEY SHARE`` lock on the lease row (PostgreSQL) until it commits.
A takeover (:func:`acquire` changing owner and token) first locks the row ``FOR UPDATE``,
which conflicts with ``FOR KEY SHARE``: so a takeover and a write can never interleave:
either the write commits before the takeover, or it waits for the takeover and sees the new
token and is refused. A renewal (:func:`renew`) and a release only change ``expires_at`` of
the owner's own row with a plain ``UPDATE`` (``FOR NO KEY UPDATE``, which does not conflict
with ``FOR KEY SHARE``): a busy owner's renewal never queues behind its own block
transactions. SQLite has a single writer (``BEGIN IMMEDIATE``), which gives the same order.
The argument in full is in docs/handoff.md ("Why a renewal never waits for a write").

Times come from the caller (the instances' clocks are assumed roughly in step, as the lease
length is seconds; the fencing token, not the clock, is what protects the data).

The same table also holds one *liveness row* per running instance, named
``@instance/<instance_id>`` (:func:`heartbeat`): instances count their live peers from it,
standbys included, to share the names out (watcher/handoff/). Chain and source names are
``[a-z0-9_-]`` (watcher/config.py), so a name starting with ``@`` never clashes with one;
:func:`leases` leaves these rows out and :func:`instances` lists them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection

from watcher.store import schema as s
from watcher.store.db import SCHEMA, Db, session_name
from watcher.store.errors import StaleFencingToken
from watcher.store.records import Lease as Lease  # its old home: still importable here

RELEASED = 0
"""``expires_at`` of a lease its owner gave up (SIGTERM): free at once."""
REBALANCED = 1
"""``expires_at`` of a lease its owner gave away to a less loaded peer: free at once."""
INSTANCE_PREFIX = "@instance/"
"""Names of the liveness rows (no chain or source name may start with ``@``)."""
PRUNE_AFTER_MS = 3_600_000
"""Liveness rows of instances gone for this long are deleted by the next heartbeat."""


def released(expires_at: int) -> bool:
    """Was the lease given up by its owner (SIGTERM or rebalance), rather than lapsed?"""
    return expires_at in (RELEASED, REBALANCED)


def instance_row(instance_id: str) -> str:
    """The liveness row's name of ``instance_id`` (hashed when too long for the column)."""
    name = INSTANCE_PREFIX + instance_id
    if len(name) <= 64:
        return name
    return INSTANCE_PREFIX + hashlib.sha256(instance_id.encode()).hexdigest()[:40]


@dataclass(frozen=True)
class Acquired:
    """The result of an acquisition attempt that changed the owner."""

    lease: Lease
    """The lease now held."""
    previous: Lease | None
    """The row before the takeover (None: first owner ever)."""
    reason: str
    """``first``, ``released`` (a clean handoff on SIGTERM), ``rebalance`` (given away to
    a less loaded peer) or ``expired`` (the owner vanished)."""


def _lease(row: Any) -> Lease:
    return Lease(row.name, row.owner, row.token, row.acquired_at, row.expires_at)


def _locked_row(conn: Connection, name: str, share: bool) -> Any:
    """The lease row, locked (PostgreSQL) ``FOR KEY SHARE`` by a fenced write (``share``) or
    ``FOR UPDATE`` by a takeover: the two conflict, a renewal's ``UPDATE`` conflicts with
    neither of the writes' locks (see the module docstring)."""
    query = select(s.leases).where(s.leases.c.name == name)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(read=share, key_share=share)
    return conn.execute(query).first()


RENEW_LOCK_TIMEOUT = "2s"
"""A renewal waits at most this long for a row lock (only a peer's takeover in progress
holds one that conflicts); then it gives up this round and the keeper tries again."""


def renew(engine: Db, name: str, owner: str, token: int, now: int, lease_ms: int) -> bool:
    """Extend ``owner``'s live lease on ``name`` under ``token`` to ``now + lease_ms``.

    One ``UPDATE ... WHERE owner AND token``: it changes no key column, so PostgreSQL takes
    ``FOR NO KEY UPDATE``, which does not wait for the ``FOR KEY SHARE`` every fenced block
    transaction holds on the row (a busy owner renews between, or during, its own writes).
    A released lease (SIGTERM, rebalance) is not renewed back to life. False: the token was
    superseded or the lease released, and nothing changed.
    """
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{RENEW_LOCK_TIMEOUT}'")
        done = conn.execute(
            update(s.leases)
            .where(
                s.leases.c.name == name,
                s.leases.c.owner == owner,
                s.leases.c.token == token,
                s.leases.c.expires_at > REBALANCED,
            )
            .values(expires_at=now + lease_ms)
        )
        return bool(done.rowcount)


def acquire(
    engine: Db, name: str, owner: str, now: int, lease_ms: int, token: int | None
) -> tuple[Lease | None, Acquired | None]:
    """Renew ``owner``'s lease on ``name`` or take it over if free or lapsed.

    ``token`` is the token the caller believes it holds (None: it holds none). Returns the
    lease the caller holds afterwards (None: another owner holds a live lease) and, when the
    owner changed, the takeover. A caller whose token was superseded never renews.
    """
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # A paused predecessor may sit on the row's share lock: give up this round
            # rather than hang the lease job (the server ends its idle transaction).
            conn.exec_driver_sql("SET LOCAL lock_timeout = '2s'")
        row = _locked_row(conn, name, share=False)
        if row is None:
            values = {
                "name": name,
                "owner": owner,
                "token": 1,
                "acquired_at": now,
                "expires_at": now + lease_ms,
            }
            conn.execute(insert(s.leases).values(**values))
            lease = Lease(**values)  # type: ignore[arg-type]
            return lease, Acquired(lease, None, "first")
        current = _lease(row)
        if current.owner == owner and token == current.token:
            conn.execute(
                update(s.leases)
                .where(s.leases.c.name == name, s.leases.c.token == current.token)
                .values(expires_at=now + lease_ms)
            )
            return Lease(name, owner, current.token, current.acquired_at, now + lease_ms), None
        if current.expires_at > now:
            return None, None
        new = Lease(name, owner, current.token + 1, now, now + lease_ms)
        conn.execute(
            update(s.leases)
            .where(s.leases.c.name == name, s.leases.c.token == current.token)
            .values(owner=owner, token=new.token, acquired_at=now, expires_at=new.expires_at)
        )
        reason = {RELEASED: "released", REBALANCED: "rebalance"}.get(current.expires_at, "expired")
        return new, Acquired(new, current, reason)


def end_lapsed_sessions(engine: Db, name: str, taker: str, now: int) -> list[int]:
    """End the open transactions of ``name``'s lapsed owner, so a takeover never waits on them.

    PostgreSQL ends a session idle inside a transaction (``IDLE_TXN_MS``), but not one whose
    process stopped in the middle of a pipeline (psycopg's ``executemany``): the server waits
    for the client's next message with no timer armed and keeps the transaction's locks. An
    owner SIGSTOPped there held its ``FOR KEY SHARE`` on the lease row for over a minute, and
    no takeover could lock the row. So a taker ends them first, only when the owner's lease
    *and* its liveness row have lapsed (the whole process stopped renewing: frozen or gone),
    and only its sessions holding a row lock in this store's lease table: not a plain read,
    a migration or the start-up of a process restarted under the same instance id. Their
    writes would be refused by the fencing token anyway; ending them loses nothing
    committed. Returns the ended backends' pids (none on SQLite, for a live owner, or a
    lease that was released or is the taker's own).
    """
    if engine.dialect.name != "postgresql":
        return []
    with engine.begin() as conn:
        row = conn.execute(select(s.leases).where(s.leases.c.name == name)).first()
        if row is None or row.owner in (None, taker) or released(row.expires_at):
            return []
        if row.expires_at > now:
            return []
        alive = conn.execute(
            select(s.leases.c.expires_at).where(s.leases.c.name == instance_row(row.owner))
        ).scalar()
        if alive is not None and alive > now:
            return []
        signalled = conn.exec_driver_sql(
            _END_LEASE_LOCKERS,
            {"app": session_name(str(row.owner), str(conn.exec_driver_sql(SCHEMA).scalar()))},
        ).all()
    return sorted(int(pid) for pid, ended in signalled if ended)


_END_LEASE_LOCKERS = (
    # The function runs only for the rows the WHERE keeps (it is in the select list). Row
    # locks (a fenced write's FOR KEY SHARE, a renewal's UPDATE) hold RowShareLock or
    # RowExclusiveLock on this store's leases table until their transaction ends; a plain
    # read, a migration or a start-up of a new process with the same instance id do not.
    "SELECT a.pid, pg_terminate_backend(a.pid) FROM pg_stat_activity a "
    "WHERE a.datname = current_database() AND a.application_name = %(app)s "
    "AND a.pid <> pg_backend_pid() AND EXISTS (SELECT 1 FROM pg_locks l "
    "WHERE l.pid = a.pid AND l.granted AND l.locktype = 'relation' "
    "AND l.relation = 'leases'::regclass AND l.mode IN ('RowShareLock', 'RowExclusiveLock'))"
)


def release(
    engine: Db, name: str, owner: str, token: int, now: int, rebalance: bool = False
) -> bool:
    """Give the lease up at once (SIGTERM, or ``rebalance``: to a less loaded peer): it
    lapses now; owner and token stay, so the handoff record names the predecessor (and why)
    and the next token is higher."""
    with engine.begin() as conn:
        done = conn.execute(
            update(s.leases)
            .where(s.leases.c.name == name, s.leases.c.owner == owner, s.leases.c.token == token)
            .values(expires_at=REBALANCED if rebalance else RELEASED)
        )
        return bool(done.rowcount)


def check_fence(conn: Connection, name: str, owner: str, token: int) -> None:
    """Raise :class:`StaleFencingToken` unless ``owner`` still holds ``token`` on ``name``.

    Runs inside the write's transaction and (PostgreSQL) keeps a ``FOR KEY SHARE`` lock on
    the lease row until that transaction ends: a takeover's ``FOR UPDATE`` waits for it, so
    no takeover can commit in between, while the owner's renewal does not wait.
    """
    row = _locked_row(conn, name, share=True)
    if row is None or row.owner != owner or row.token != token or released(row.expires_at):
        raise StaleFencingToken(
            name,
            owner,
            token,
            None if row is None else row.owner,
            None if row is None else row.token,
        )


def record_rejection(engine: Db, exc: StaleFencingToken, now: int) -> None:
    """Store a refused write (in its own transaction: the refused one was rolled back)."""
    with engine.begin() as conn:
        conn.execute(
            insert(s.fencing_rejections).values(
                name=exc.name,
                owner=exc.owner,
                token=exc.token,
                current_owner=exc.current_owner,
                current_token=exc.current_token,
                at=now,
            )
        )


def leases(engine: Db) -> list[Lease]:
    """Every lease of a chain or source, by name (liveness rows left out)."""
    return [x for x in all_rows(engine) if not x.name.startswith(INSTANCE_PREFIX)]


def instances(engine: Db) -> list[Lease]:
    """Every liveness row (``owner`` the instance, ``acquired_at`` its last heartbeat)."""
    return [x for x in all_rows(engine) if x.name.startswith(INSTANCE_PREFIX)]


def all_rows(engine: Db) -> list[Lease]:
    """Every row of the table, leases and liveness rows, by name (one read per tick)."""
    with engine.connect() as conn:
        rows = conn.execute(select(s.leases).order_by(s.leases.c.name)).all()
    return [_lease(r) for r in rows]


def heartbeat(engine: Db, instance_id: str, now: int, lease_ms: int) -> None:
    """Say ``instance_id`` is alive until ``now + lease_ms`` (its liveness row: ``acquired_at``
    is the last heartbeat, ``token`` stays 0, it is never fenced); delete the rows of
    instances gone for over :data:`PRUNE_AFTER_MS` (default ids carry the pid)."""
    name = instance_row(instance_id)
    with engine.begin() as conn:
        done = conn.execute(
            update(s.leases)
            .where(s.leases.c.name == name)
            .values(owner=instance_id, acquired_at=now, expires_at=now + lease_ms)
        )
        if not done.rowcount:
            conn.execute(
                insert(s.leases).values(
                    name=name,
                    owner=instance_id,
                    token=0,
                    acquired_at=now,
                    expires_at=now + lease_ms,
                )
            )
        conn.execute(
            delete(s.leases).where(
                s.leases.c.name.startswith(INSTANCE_PREFIX, autoescape=True),
                s.leases.c.expires_at < now - PRUNE_AFTER_MS,
            )
        )


def leave(engine: Db, instance_id: str) -> None:
    """Delete ``instance_id``'s liveness row (SIGTERM): peers stop counting it at once."""
    with engine.begin() as conn:
        conn.execute(delete(s.leases).where(s.leases.c.name == instance_row(instance_id)))


def rejections(engine: Db) -> list[dict[str, Any]]:
    """Every refused write, oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(select(s.fencing_rejections).order_by(s.fencing_rejections.c.id))
        return [dict(r._mapping) for r in rows]


def add_handoff(engine: Db, values: dict[str, Any]) -> int:
    """Store one takeover record; returns its id."""
    with engine.begin() as conn:
        result = conn.execute(insert(s.handoffs).values(**values))
        key = result.inserted_primary_key
        return int(key[0]) if key else 0


def handoffs(engine: Db, name: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """Takeover records, newest first."""
    h = s.handoffs
    query = select(h).order_by(h.c.id.desc()).limit(limit)
    if name is not None:
        query = query.where(h.c.name == name)
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def handoff(engine: Db, handoff_id: int) -> dict[str, Any] | None:
    """One takeover record by id (None if there is none)."""
    h = s.handoffs
    with engine.connect() as conn:
        row = conn.execute(select(h).where(h.c.id == handoff_id)).first()
    return None if row is None else dict(row._mapping)


def max_delivery_id(conn: Connection) -> int:
    """The outbox position: the highest delivery id so far."""
    return int(conn.execute(select(func.coalesce(func.max(s.deliveries.c.id), 0))).scalar_one())
