"""What the handoff between instances reads and writes, as store methods.

watcher/handoff/ decides (who takes, who gives, what a takeover found); this module is its
only way to the database: the lease rows (:mod:`watcher.store.lease_store`), the takeover
records, and the two reads a takeover's checkpoint and in-flight registry are made of.
Database errors leave it as :class:`watcher.store.errors.StoreError` (the store's edge maps
them), so the handoff package never sees SQLAlchemy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, or_, select

from watcher.store import lease_store as ls
from watcher.store import schema as s
from watcher.store.errors import StaleFencingToken
from watcher.store.records import Lease
from watcher.store.store import Store


@dataclass(frozen=True)
class OpenDelivery:
    """An outbox row not acknowledged yet (an in-flight operation at a takeover)."""

    id: int
    kind: str
    state: str
    idempotency_key: str
    next_attempt_at: int | None


@dataclass(frozen=True)
class CommittedCounts:
    """How many settlements of one name are in each verdict, and how many are watched."""

    verdicts: dict[str, int]
    watching: int
    outbox_position: int
    """The highest delivery id so far."""


class HandoffStore:
    """The lease table, takeover records and takeover reads of one :class:`Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.enabled = store.dialect == "postgresql"
        """Leases only make sense on a shared store; SQLite means one instance owns all."""

    # -- leases -----------------------------------------------------------------------------

    def rows(self) -> list[Lease]:
        """Every lease and liveness row."""
        return ls.all_rows(self.store.writer)

    def heartbeat(self, instance_id: str, now: int, lease_ms: int) -> None:
        """Renew ``instance_id``'s liveness row."""
        ls.heartbeat(self.store.writer, instance_id, now, lease_ms)

    def leave(self, instance_id: str) -> None:
        """Delete ``instance_id``'s liveness row."""
        ls.leave(self.store.writer, instance_id)

    def acquire(
        self, name: str, owner: str, now: int, lease_ms: int
    ) -> tuple[Lease | None, ls.Acquired | None]:
        """Take ``name`` if it is free or lapsed (see :func:`lease_store.acquire`)."""
        return ls.acquire(self.store.writer, name, owner, now, lease_ms, None)

    def end_lapsed_sessions(self, name: str, taker: str, now: int) -> list[int]:
        """End the open transactions of ``name``'s lapsed owner (see
        :func:`lease_store.end_lapsed_sessions`); the pids ended."""
        return ls.end_lapsed_sessions(self.store.writer, name, taker, now)

    def renew(self, name: str, owner: str, token: int, now: int, lease_ms: int) -> bool:
        """Renew a held lease; False when its token was superseded."""
        return ls.renew(self.store.writer, name, owner, token, now, lease_ms)

    def release(
        self, name: str, owner: str, token: int, now: int, *, rebalance: bool = False
    ) -> None:
        """Give a held lease up (free at once)."""
        ls.release(self.store.writer, name, owner, token, now, rebalance=rebalance)

    def refuse_renewal(self, name: str, owner: str, token: int, now: int) -> None:
        """Record the refusal of a renewal carrying a superseded token, like a refused
        write (``fencing_rejections``), naming the lease's current owner and token."""
        current = next((x for x in ls.leases(self.store.writer) if x.name == name), None)
        refusal = StaleFencingToken(
            name,
            owner,
            token,
            None if current is None else current.owner,
            None if current is None else current.token,
        )
        ls.record_rejection(self.store.writer, refusal, now)

    # -- takeovers --------------------------------------------------------------------------

    def add_handoff(self, values: dict[str, Any]) -> int:
        """Store one takeover record; returns its id."""
        return ls.add_handoff(self.store.writer, values)

    def committed_counts(self, name: str) -> CommittedCounts:
        """The verdict counts and watched count of ``name``, and the outbox position."""
        t = s.settlements
        with self.store.reader.connect() as conn:
            verdicts = {
                str(v): int(n)
                for v, n in conn.execute(
                    select(t.c.verdict, func.count()).where(t.c.chain == name).group_by(t.c.verdict)
                )
            }
            watching = int(
                conn.execute(
                    select(func.count()).where(t.c.chain == name, t.c.watching.is_(True))
                ).scalar_one()
            )
            outbox = ls.max_delivery_id(conn)
        return CommittedCounts(verdicts, watching, outbox)

    def open_deliveries(self, name: str, limit: int = 500) -> list[OpenDelivery]:
        """Outbox rows of ``name`` (its settlements' or its events') still pending or
        being sent, in id order."""
        d, t, e = s.deliveries, s.settlements, s.events
        with self.store.reader.connect() as conn:
            rows = conn.execute(
                select(d.c.id, d.c.kind, d.c.state, d.c.idempotency_key, d.c.next_attempt_at)
                .where(
                    d.c.state.in_(("pending", "sending")),
                    or_(
                        d.c.settlement_id.in_(select(t.c.settlement_id).where(t.c.chain == name)),
                        d.c.event_id.in_(select(e.c.id).where(e.c.chain == name)),
                    ),
                )
                .order_by(d.c.id)
                .limit(limit)
            ).all()
        return [
            OpenDelivery(
                int(r.id),
                str(r.kind),
                str(r.state),
                str(r.idempotency_key),
                None if r.next_attempt_at is None else int(r.next_attempt_at),
            )
            for r in rows
        ]
