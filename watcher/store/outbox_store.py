"""The delivery outbox: rows of the ``deliveries`` table and every operation on them.

Why an outbox: the verdict and "tell the caller" must not drift apart. The engine inserts the
delivery row in the *same* transaction as the verdict (or the alert event), so a crash leaves
both or neither; a sender then works the table until each row is delivered or dead.

A row's life::

    pending ──claim──▶ sending ──2xx──▶ delivered
       ▲                  │  error, attempts < max_attempts (backoff)
       └──────────────────┤
                          │  error, attempts >= max_attempts
                          ▼
                         dead ──replay──▶ pending

    pending | sending ──finality reversed before delivery──▶ cancelled
    cancelled ──the settlement is confirmed again──▶ pending

A ``sending`` row keeps its *lease* in ``next_attempt_at``: once that instant passes, the
row is due again (its sender crashed or hangs) and another claim resends it with the same
``Idempotency-Key``. ``attempts`` is incremented by each claim and doubles as the claim's
fencing token: a sender may only finish a row whose ``attempts`` is still the one it
claimed, so a late answer from a superseded attempt cannot overwrite a newer outcome.

Claims are safe between threads and between instances: PostgreSQL selects due rows
``FOR UPDATE SKIP LOCKED``; SQLite runs one claiming ``UPDATE … RETURNING`` inside the
store's ``BEGIN IMMEDIATE`` transaction, which serialises claimers.

Rows of the ``commit`` channel (commit, discard, provisional updates to a settlement's
``commit_url``) are delivered in order per settlement: a row is not claimed while an older
row of the same settlement is still pending or sending. Alert rows have no such order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, select, update

from guard.receipts import REVOCATION
from watcher.store import events_store
from watcher.store import schema as s
from watcher.store.db import Db, note_outbox_changed
from watcher.store.errors import DeliveryNotFound, DeliveryNotReplayable
from watcher.store.outbox_sql import (
    BURY_OVER_CAP,
    FINISH,
    HELD,
    PG_CLAIM,
    PG_EXPIRED,
    PG_HELD,
    PG_PENDING,
    SQLITE_CLAIM,
)
from watcher.store.outbox_states import (
    CANCELLED,
    COMMIT_CHANNEL,
    DEAD,
    DELIVERED,
    PENDING,
    SENDING,
    STATES,
    NewDelivery,
    Outcome,
)
from watcher.store.outbox_writes import cancel_undelivered, enqueue, retire_commit, sql_body
from watcher.store.records import DeliveryRecord, ReceiptRecord, from_row

ReceiptRow = ReceiptRecord
"""A stored receipt as the outbox reads it: the receipts table has one row type."""


@dataclass(frozen=True)
class Claimed:
    """What one claim did: the rows now leased to the claimer, and the rows it made dead."""

    rows: list[DeliveryRecord]
    """Leased ``sending`` rows, in id order."""
    buried: list[DeliveryRecord]
    """Rows past the attempt cap, now ``dead``."""


# -- the sender's and the API's side -----------------------------------------------------------


class Outbox:
    """Operations on the outbox with their own transactions (sender, API, CLI, metrics)."""

    def __init__(self, writer: Db, reader: Db) -> None:
        self._writer = writer
        self._reader = reader
        self.dialect = writer.dialect.name

    @property
    def changes(self) -> int:
        """How many committed transactions of this process added or changed rows so far
        (grows only): a sender that saw the same number before its last claim has no new
        row of this process to look for."""
        return self._writer.outbox_commits

    # -- claiming ------------------------------------------------------------------------

    def claim(self, now: int, limit: int, lease_ms: int) -> list[DeliveryRecord]:
        """Take up to ``limit`` due rows (:meth:`claim_within` without an attempt cap)."""
        return self.claim_within(now, limit, lease_ms, None).rows

    def claim_within(
        self, now: int, limit: int, lease_ms: int, max_attempts: int | None
    ) -> Claimed:
        """Take up to ``limit`` due rows: mark them ``sending`` until ``now + lease_ms``.

        Due are ``sending`` rows whose lease ended (a crashed or hung attempt: first, so they
        are not starved), then ``pending`` rows not held back by an older undelivered row of
        the same settlement (commit channel); each set is an index range scan in
        ``next_attempt_at`` order, never a sort of the whole backlog. First, in the same
        transaction, due rows that had ``max_attempts`` attempts already are made ``dead``
        (:attr:`Claimed.buried`): the cap holds even for attempts that never reported."""
        params = {"now": now, "lim": limit, "lease_end": now + lease_ms}
        with self._writer.begin() as conn:
            buried: list[DeliveryRecord] = []
            if max_attempts is not None:
                why = (
                    f"dead after {max_attempts} attempts: the last one ended without an "
                    "outcome (its lease ran out: the daemon stopped, or the attempt hung)"
                )
                dead = conn.execute(
                    BURY_OVER_CAP, {"now": now, "max_attempts": max_attempts, "why": why}
                )
                buried = [from_row(DeliveryRecord, r) for r in dead.mappings()]
            if self.dialect == "postgresql":
                # Rows another instance is claiming right now are skipped, not waited for.
                ids = list(conn.execute(PG_EXPIRED, params).scalars())
                if len(ids) < limit:
                    ids += conn.execute(PG_PENDING, {**params, "lim": limit - len(ids)}).scalars()
                rows = conn.execute(PG_CLAIM, {**params, "ids": ids}) if ids else None
            else:
                # One claiming UPDATE; BEGIN IMMEDIATE has taken the write lock already.
                rows = conn.execute(SQLITE_CLAIM, params)
            records = [] if rows is None else [from_row(DeliveryRecord, r) for r in rows.mappings()]
        return Claimed(sorted(records, key=lambda r: r.id), buried)

    def next_due_at(self, now: int) -> int | None:
        """The next instant after ``now`` at which a row falls due (a retry, or a lease
        ending), for the sender's idle sleep; rows due already are the claim's business,
        and rows held back by an older one are released when that one is done."""
        d = s.deliveries
        times = []
        with self._reader.connect() as conn:
            for state in (PENDING, SENDING):
                value = conn.execute(
                    select(func.min(d.c.next_attempt_at)).where(
                        d.c.state == state, d.c.next_attempt_at > now
                    )
                ).scalar()
                if value is not None:
                    times.append(int(value))
        return min(times) if times else None

    def finish(self, outcomes: Sequence[Outcome]) -> list[bool]:
        """Record how claimed attempts ended, all in one transaction (a sender batches them:
        on SQLite, one writer and one commit beat many writers queueing on the lock).

        A row is only updated if it is still ``sending`` under the same claim (its
        ``attempts``); the answer says, per outcome, whether it was (False: superseded by a
        newer claim after the lease ended, so the newer claim's outcome stands)."""
        if not outcomes:
            return []
        # PostgreSQL locks the rows; on SQLite, BEGIN IMMEDIATE holds the write lock.
        held = PG_HELD if self.dialect == "postgresql" else HELD
        with self._writer.begin() as conn:
            ids = [o.rec.id for o in outcomes]
            current = {int(r[0]): int(r[1]) for r in conn.execute(held, {"ids": ids})}
            mine = [o for o in outcomes if current.get(o.rec.id) == o.rec.attempts]
            if mine:
                conn.execute(FINISH, [o.params() for o in mine])
        kept = {o.rec.id for o in mine}
        return [o.rec.id in kept for o in outcomes]

    def set_body(self, rec: DeliveryRecord, body: dict[str, Any], now: int) -> DeliveryRecord:
        """Store the assembled body (once: a body already stored wins); returns the row."""
        d = s.deliveries
        with self._writer.begin() as conn:
            conn.execute(
                update(d)
                .where(d.c.id == rec.id, d.c.body.is_(None))
                .values(body=body, updated_at=now)
            )
            row = conn.execute(select(d).where(d.c.id == rec.id)).mappings().one()
        return from_row(DeliveryRecord, row)

    def postpone(self, rec: DeliveryRecord, now: int, due_at: int) -> bool:
        """Give a claimed row back without an attempt (its body cannot be assembled yet)."""
        return self.finish([Outcome(rec, PENDING, now, due_at=due_at, attempted=False)])[0]

    def mark_delivered(self, rec: DeliveryRecord, now: int, status: int) -> bool:
        """The receiver answered 2xx."""
        return self.finish([Outcome(rec, DELIVERED, now, status=status)])[0]

    def mark_failed(
        self, rec: DeliveryRecord, now: int, status: int | None, error: str, retry_at: int | None
    ) -> bool:
        """The attempt failed: due again at ``retry_at``, or dead when it is None."""
        state = DEAD if retry_at is None else PENDING
        return self.finish([Outcome(rec, state, now, status, error, retry_at)])[0]

    # -- operators -----------------------------------------------------------------------

    def get(self, delivery_id: int, *, owner: str | None = None) -> DeliveryRecord:
        """One delivery; raises :class:`DeliveryNotFound`, also when ``owner`` is given and
        the delivery is not of one of its settlements."""
        d = s.deliveries
        query = select(d).where(d.c.id == delivery_id)
        if owner is not None:
            query = query.where(d.c.settlement_id.in_(_settlements_of(owner)))
        with self._reader.connect() as conn:
            row = conn.execute(query).mappings().first()
        if row is None:
            raise DeliveryNotFound(delivery_id)
        return from_row(DeliveryRecord, row)

    def list(
        self,
        state: str | None = None,
        settlement_id: str | None = None,
        after_id: int = 0,
        limit: int = 100,
        *,
        owner: str | None = None,
    ) -> list[DeliveryRecord]:
        """Deliveries in id order, optionally filtered by state and settlement; for
        ``owner``, only the deliveries of its settlements (no alert rows)."""
        d = s.deliveries
        query = select(d).where(d.c.id > after_id).order_by(d.c.id).limit(limit)
        if state is not None:
            query = query.where(d.c.state == state)
        if settlement_id is not None:
            query = query.where(d.c.settlement_id == settlement_id)
        if owner is not None:
            query = query.where(d.c.settlement_id.in_(_settlements_of(owner)))
        with self._reader.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [from_row(DeliveryRecord, r) for r in rows]

    def replay(self, delivery_id: int, now: int) -> DeliveryRecord:
        """Make a dead delivery pending again with fresh attempts (same idempotency key)."""
        d = s.deliveries
        with self._writer.begin() as conn:
            row = conn.execute(select(d.c.state).where(d.c.id == delivery_id)).first()
            if row is None:
                raise DeliveryNotFound(delivery_id)
            if row[0] != DEAD:
                raise DeliveryNotReplayable(delivery_id, str(row[0]))
            conn.execute(
                update(d)
                .where(d.c.id == delivery_id)
                .values(state=PENDING, attempts=0, next_attempt_at=now, updated_at=now)
            )
            note_outbox_changed(conn)
        return self.get(delivery_id)

    def counts(self) -> dict[tuple[str, str], int]:
        """Deliveries by (channel, state)."""
        d = s.deliveries
        with self._reader.connect() as conn:
            rows = conn.execute(
                select(d.c.channel, d.c.state, func.count()).group_by(d.c.channel, d.c.state)
            ).all()
        return {(r[0], r[1]): int(r[2]) for r in rows}

    def backlog(self) -> tuple[int, int | None]:
        """(rows pending or sending, creation time of the oldest of them)."""
        d = s.deliveries
        with self._reader.connect() as conn:
            row = conn.execute(
                select(func.count(), func.min(d.c.created_at)).where(
                    d.c.state.in_([PENDING, SENDING])
                )
            ).one()
        return int(row[0]), None if row[1] is None else int(row[1])

    def enqueue_many(self, news: Sequence[NewDelivery], now: int) -> None:
        """Insert many rows in one transaction (bulk loads: benchmarks, imports)."""
        if not news:
            return
        rows = [
            {
                "settlement_id": n.settlement_id,
                "event_id": n.event_id,
                "channel": n.channel,
                "kind": n.kind,
                "url": n.url,
                "idempotency_key": n.idempotency_key,
                "state": PENDING,
                "attempts": 0,
                "next_attempt_at": now,
                "body": sql_body(n.body),
                "created_at": now,
                "updated_at": now,
            }
            for n in news
        ]
        with self._writer.begin() as conn:
            conn.execute(insert(s.deliveries), rows)
            note_outbox_changed(conn)

    # -- what a body is assembled from ----------------------------------------------------------

    def event(self, event_id: int) -> tuple[dict[str, Any], int] | None:
        """(payload, created_at) of a stored event: the decision a commit or discard reports."""
        return events_store.event_at(self._reader, event_id)

    def last_event_id(self) -> int:
        """The newest event's id (0 when there is none)."""
        return events_store.last_event_id(self._reader)

    def receipt_for(
        self, settlement_id: str, kind: str, decision_digest: str | None, not_before: int
    ) -> ReceiptRow | None:
        """The newest unrevoked receipt of ``kind`` for the settlement that was made for the
        decision being delivered: one citing ``decision_digest``, or (a receipt that cites
        no decision, such as the binding) one made at or after ``not_before``.

        A receipt of an earlier decision (confirmed, reversed by a reorg, confirmed again)
        is never sent with the later one."""
        r = s.receipts
        with self._reader.connect() as conn:
            rows = (
                conn.execute(
                    select(r)
                    .where(r.c.settlement_id == settlement_id, r.c.kind.in_([kind, REVOCATION]))
                    .order_by(r.c.id.desc())
                )
                .mappings()
                .all()
            )
        found = [from_row(ReceiptRow, row) for row in rows]
        revoked = {x.revokes for x in found if x.kind == REVOCATION}
        for receipt in found:
            if receipt.kind != kind or receipt.id in revoked:
                continue
            cited = receipt.body.get("decision_digest") if isinstance(receipt.body, dict) else None
            if cited is not None:
                if cited == decision_digest:
                    return receipt
            elif receipt.created_at >= not_before:
                return receipt
        return None

    def reorg_depths(self) -> dict[tuple[str, int], int]:
        """Reorgs by (chain, depth), for the depth histogram."""
        t = s.reorgs
        with self._reader.connect() as conn:
            rows = conn.execute(
                select(t.c.chain, t.c.depth, func.count()).group_by(t.c.chain, t.c.depth)
            ).all()
        return {(r[0], int(r[1])): int(r[2]) for r in rows}


__all__ = [
    "CANCELLED",
    "COMMIT_CHANNEL",
    "DEAD",
    "DELIVERED",
    "PENDING",
    "REVOCATION",
    "SENDING",
    "STATES",
    "DeliveryNotFound",
    "DeliveryNotReplayable",
    "DeliveryRecord",
    "NewDelivery",
    "Outbox",
    "Outcome",
    "ReceiptRow",
    "cancel_undelivered",
    "enqueue",
    "retire_commit",
]


def _settlements_of(owner: str) -> Any:
    """The ids of ``owner``'s settlements, as a subquery."""
    return select(s.settlements.c.settlement_id).where(s.settlements.c.owner == owner)
