"""Leases with fencing tokens: who owns the processing of a chain (or a source) right now.

A lease row per name holds the owner, the time it lasts until, and a *fencing token* that
only ever grows: each change of owner increments it. Every processing write carries the
token it was started under; :func:`check_fence` verifies it inside the write's own
transaction, holding a share lock on the lease row (PostgreSQL) so that a takeover (an
``UPDATE`` of that row) and a write can never interleave: either the write commits before
the takeover, or it sees the new token and is refused. SQLite has a single writer
(``BEGIN IMMEDIATE``), which gives the same order.

Times come from the caller (the instances' clocks are assumed roughly in step, as the lease
length is seconds; the fencing token, not the clock, is what protects the data).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, func, insert, select, update
from sqlalchemy.engine import Connection

from watcher.store import schema as s
from watcher.store.errors import StaleFencingToken

RELEASED = 0
"""``expires_at`` of a lease its owner gave up (SIGTERM): free at once."""


@dataclass(frozen=True)
class Lease:
    """One lease row."""

    name: str
    """The chain or source name whose processing it guards."""
    owner: str | None
    """Instance holding it (or, once lapsed, that last held it)."""
    token: int
    """Fencing token: grows by one at every change of owner."""
    acquired_at: int
    """When the current owner acquired it (ms)."""
    expires_at: int
    """When it lapses unless renewed (ms); :data:`RELEASED` once given up."""


@dataclass(frozen=True)
class Acquired:
    """The result of an acquisition attempt that changed the owner."""

    lease: Lease
    """The lease now held."""
    previous: Lease | None
    """The row before the takeover (None: first owner ever)."""
    reason: str
    """``first``, ``released`` (a clean handoff) or ``expired`` (the owner vanished)."""


def _lease(row: Any) -> Lease:
    return Lease(row.name, row.owner, row.token, row.acquired_at, row.expires_at)


def _locked_row(conn: Connection, name: str, share: bool) -> Any:
    query = select(s.leases).where(s.leases.c.name == name)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(read=share)
    return conn.execute(query).first()


def acquire(
    engine: Engine, name: str, owner: str, now: int, lease_ms: int, token: int | None
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
        reason = "released" if current.expires_at == RELEASED else "expired"
        return new, Acquired(new, current, reason)


def release(engine: Engine, name: str, owner: str, token: int, now: int) -> bool:
    """Give the lease up at once (SIGTERM): it lapses now; owner and token stay, so the
    handoff record names the predecessor and the next token is higher."""
    with engine.begin() as conn:
        done = conn.execute(
            update(s.leases)
            .where(s.leases.c.name == name, s.leases.c.owner == owner, s.leases.c.token == token)
            .values(expires_at=RELEASED)
        )
        return bool(done.rowcount)


def check_fence(conn: Connection, name: str, owner: str, token: int) -> None:
    """Raise :class:`StaleFencingToken` unless ``owner`` still holds ``token`` on ``name``.

    Runs inside the write's transaction and (PostgreSQL) keeps a share lock on the lease
    row until that transaction ends, so no takeover can commit in between.
    """
    row = _locked_row(conn, name, share=True)
    if row is None or row.owner != owner or row.token != token or row.expires_at == RELEASED:
        raise StaleFencingToken(
            name,
            owner,
            token,
            None if row is None else row.owner,
            None if row is None else row.token,
        )


def record_rejection(engine: Engine, exc: StaleFencingToken, now: int) -> None:
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


def leases(engine: Engine) -> list[Lease]:
    """Every lease row, by name."""
    with engine.connect() as conn:
        rows = conn.execute(select(s.leases).order_by(s.leases.c.name)).all()
    return [_lease(r) for r in rows]


def rejections(engine: Engine) -> list[dict[str, Any]]:
    """Every refused write, oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(select(s.fencing_rejections).order_by(s.fencing_rejections.c.id))
        return [dict(r._mapping) for r in rows]


def add_handoff(engine: Engine, values: dict[str, Any]) -> int:
    """Store one takeover record; returns its id."""
    with engine.begin() as conn:
        result = conn.execute(insert(s.handoffs).values(**values))
        key = result.inserted_primary_key
        return int(key[0]) if key else 0


def handoffs(engine: Engine, name: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """Takeover records, newest first."""
    h = s.handoffs
    query = select(h).order_by(h.c.id.desc()).limit(limit)
    if name is not None:
        query = query.where(h.c.name == name)
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def max_delivery_id(conn: Connection) -> int:
    """The outbox position: the highest delivery id so far."""
    return int(conn.execute(select(func.coalesce(func.max(s.deliveries.c.id), 0))).scalar_one())
