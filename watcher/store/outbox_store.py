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

from sqlalchemy import (
    BigInteger,
    BindParameter,
    Engine,
    Integer,
    bindparam,
    exists,
    func,
    insert,
    null,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from watcher.store import schema as s
from watcher.store.errors import StoreError
from watcher.store.records import from_row

PENDING, SENDING, DELIVERED, DEAD, CANCELLED = (
    "pending",
    "sending",
    "delivered",
    "dead",
    "cancelled",
)
STATES = (PENDING, SENDING, DELIVERED, DEAD, CANCELLED)
"""Every state a delivery can be in."""

COMMIT_CHANNEL = "commit"
"""Channel of the rows sent to a settlement's ``commit_url`` (ordered per settlement)."""


class DeliveryNotFound(StoreError, LookupError):
    """No delivery with that id."""

    def __init__(self, delivery_id: int) -> None:
        super().__init__(f"no delivery {delivery_id}")
        self.delivery_id = delivery_id


class DeliveryNotReplayable(StoreError):
    """Only a dead delivery can be replayed (others are delivered, or still being tried)."""

    def __init__(self, delivery_id: int, state: str) -> None:
        super().__init__(f"delivery {delivery_id} is {state}: only a dead delivery can be replayed")
        self.delivery_id = delivery_id
        self.state = state


@dataclass(frozen=True)
class NewDelivery:
    """What enqueueing writes."""

    channel: str
    """``commit`` (to a settlement's commit_url), ``webhook`` or ``slack``."""
    kind: str
    """``commit``, ``discard``, ``provisional``, or the alert's event kind."""
    url: str
    """Where it is POSTed."""
    idempotency_key: str
    """Stable across retries and restarts; unique in the table."""
    settlement_id: str | None = None
    """Settlement concerned, if any."""
    event_id: int | None = None
    """The event it reports (alerts), or the verdict's lifecycle event (commit/discard)."""
    body: dict[str, Any] | None = None
    """The JSON body; ``None`` until assembled (commit/discard wait for their receipt)."""


@dataclass(frozen=True)
class DeliveryRecord:
    """A delivery as stored."""

    id: int
    """Sequence (also the outbox order)."""
    settlement_id: str | None
    """Settlement concerned, if any."""
    event_id: int | None
    """Event reported (alerts) or the verdict's lifecycle event (commit/discard)."""
    channel: str
    """``commit``, ``webhook`` or ``slack``."""
    kind: str
    """``commit``, ``discard``, ``provisional`` or an event kind."""
    url: str
    """Target URL."""
    idempotency_key: str
    """Sent as ``Idempotency-Key``; the same for every attempt."""
    state: str
    """One of :data:`STATES`."""
    attempts: int
    """Claims so far (a crashed attempt counts); the fencing token of the current claim."""
    next_attempt_at: int
    """When it is due (pending), or when its lease ends (sending)."""
    last_error: str | None
    """Why the last attempt failed."""
    last_status: int | None
    """HTTP status of the last answer, if any."""
    body: dict[str, Any] | None
    """The body, once assembled; every attempt sends exactly these bytes."""
    created_at: int
    """Enqueued (ms)."""
    updated_at: int
    """Last change (ms)."""
    delivered_at: int | None
    """When a 2xx answer was received."""


@dataclass(frozen=True)
class ReceiptRow:
    """A signed receipt as stored by the receipts component (read-only here)."""

    id: int
    """Sequence."""
    kind: str
    """``settlement_finality_receipt``, ``settlement_failure_receipt``..."""
    signer: str
    """Address of the signing key."""
    digest: str
    """Digest of the receipt."""
    body: dict[str, Any]
    """The receipt document."""
    created_at: int
    """When it was made (ms)."""
    revokes: int | None = None
    """For a revocation: the id of the receipt it withdraws."""


REVOCATION = "receipt_revocation"
"""Kind of the receipt that withdraws another (a reorg reversed its decision)."""


@dataclass(frozen=True)
class Outcome:
    """How one claimed attempt ended: what :meth:`Outbox.finish` writes."""

    rec: DeliveryRecord
    """The row as claimed (its ``attempts`` is the claim's token)."""
    state: str
    """``delivered``, ``pending`` (retry, or given back unattempted) or ``dead``."""
    at: int
    """When it ended (ms)."""
    status: int | None = None
    """HTTP status of the answer, if any."""
    error: str | None = None
    """Why it failed."""
    due_at: int | None = None
    """When a ``pending`` row is due again."""
    attempted: bool = True
    """False when the row is given back without a request (its receipt is awaited)."""

    def params(self) -> dict[str, Any]:
        """Parameters of :data:`_FINISH` for this outcome (every column it may set)."""
        rec = self.rec
        if not self.attempted:  # given back: the claim did not count as an attempt
            return {
                "b_id": rec.id,
                "b_attempts": rec.attempts,
                "b_state": self.state,
                "b_new_attempts": rec.attempts - 1,
                "b_next": self.due_at,
                "b_status": rec.last_status,
                "b_error": rec.last_error,
                "b_delivered_at": rec.delivered_at,
                "b_now": self.at,
            }
        return {
            "b_id": rec.id,
            "b_attempts": rec.attempts,
            "b_state": self.state,
            "b_new_attempts": rec.attempts,
            "b_next": self.due_at if self.due_at is not None else rec.next_attempt_at,
            "b_status": self.status,
            "b_error": None if self.error is None else self.error[:2000],
            "b_delivered_at": self.at if self.state == DELIVERED else None,
            "b_now": self.at,
        }


_FINISH = (
    update(s.deliveries)
    .where(
        s.deliveries.c.id == bindparam("b_id"),
        s.deliveries.c.attempts == bindparam("b_attempts"),
        s.deliveries.c.state == SENDING,
    )
    .values(
        state=bindparam("b_state"),
        attempts=bindparam("b_new_attempts"),
        next_attempt_at=bindparam("b_next"),
        last_status=bindparam("b_status"),
        last_error=bindparam("b_error"),
        delivered_at=bindparam("b_delivered_at"),
        updated_at=bindparam("b_now"),
    )
)
"""One statement for every outcome, run as an executemany over a batch."""


def _claim_statements() -> dict[str, Any]:
    """The claim's statements, built once: SQLAlchemy then reuses their compiled form
    (building them per call cost more than running them)."""
    d = s.deliveries
    older = s.deliveries.alias("older")
    blocked = exists().where(
        d.c.channel == COMMIT_CHANNEL,
        older.c.channel == COMMIT_CHANNEL,
        older.c.settlement_id == d.c.settlement_id,
        older.c.id < d.c.id,
        older.c.state.in_([PENDING, SENDING]),
    )
    now: BindParameter[int] = bindparam("now", type_=BigInteger)
    lim: BindParameter[int] = bindparam("lim", type_=Integer)
    expired = (
        select(d.c.id)
        .where(d.c.state == SENDING, d.c.next_attempt_at <= now)
        .order_by(d.c.next_attempt_at)
        .limit(lim)
    )
    pending = (
        select(d.c.id)
        .where(d.c.state == PENDING, d.c.next_attempt_at <= now, ~blocked)
        .order_by(d.c.next_attempt_at)
        .limit(lim)
    )
    claimed = {
        "state": SENDING,
        "attempts": d.c.attempts + 1,
        "next_attempt_at": bindparam("lease_end"),
        "updated_at": now,
    }
    both = union_all(select(expired.subquery().c.id), select(pending.subquery().c.id)).subquery()
    return {
        "sqlite": update(d)
        .where(d.c.id.in_(select(both.c.id).limit(lim)))
        .values(**claimed)
        .returning(*d.c),
        "pg_expired": expired.with_for_update(skip_locked=True, of=d),
        "pg_pending": pending.with_for_update(skip_locked=True, of=d),
        "pg_claim": update(d)
        .where(d.c.id.in_(bindparam("ids", expanding=True)))
        .values(**claimed)
        .returning(*d.c),
    }


_CLAIM = _claim_statements()
_SQLITE_CLAIM = _CLAIM["sqlite"]
_PG_EXPIRED = _CLAIM["pg_expired"]
_PG_PENDING = _CLAIM["pg_pending"]
_PG_CLAIM = _CLAIM["pg_claim"]
_HELD = select(s.deliveries.c.id, s.deliveries.c.attempts).where(
    s.deliveries.c.id.in_(bindparam("ids", expanding=True)), s.deliveries.c.state == SENDING
)
_PG_HELD = _HELD.with_for_update()


# -- writes inside a caller's transaction (the engine's block transaction) -------------------


def _sql_body(body: dict[str, Any] | None) -> Any:
    """SQL NULL for "no body yet" (the JSON type would store None as the JSON text null,
    which ``IS NULL`` does not match)."""
    return null() if body is None else body


def enqueue(conn: Connection, new: NewDelivery, now: int) -> bool:
    """Insert ``new`` unless its idempotency key exists; True if a row was written.

    A ``cancelled`` row with the same key is revived instead (a settlement confirmed again
    after a reorg took its first confirmation away): same key, body re-assembled.
    """
    values = {
        "settlement_id": new.settlement_id,
        "event_id": new.event_id,
        "channel": new.channel,
        "kind": new.kind,
        "url": new.url,
        "idempotency_key": new.idempotency_key,
        "state": PENDING,
        "attempts": 0,
        "next_attempt_at": now,
        "body": _sql_body(new.body),
        "created_at": now,
        "updated_at": now,
    }
    dialect = conn.dialect.name
    stmt: Any
    if dialect == "postgresql":
        stmt = pg_insert(s.deliveries).values(**values).on_conflict_do_nothing()
    elif dialect == "sqlite":
        stmt = sqlite_insert(s.deliveries).values(**values).on_conflict_do_nothing()
    else:  # pragma: no cover - only the two backends are supported
        raise StoreError(f"outbox: unsupported database {dialect!r}")
    # RETURNING, not rowcount: drivers disagree on rowcount for ON CONFLICT DO NOTHING.
    if conn.execute(stmt.returning(s.deliveries.c.id)).first() is not None:
        return True
    d = s.deliveries
    revived = conn.execute(
        update(d)
        .where(d.c.idempotency_key == new.idempotency_key, d.c.state == CANCELLED)
        .values(
            state=PENDING,
            attempts=0,
            next_attempt_at=now,
            body=_sql_body(new.body),
            event_id=new.event_id,
            last_error=None,
            last_status=None,
            updated_at=now,
        )
    )
    return bool(revived.rowcount)


def cancel_undelivered(
    conn: Connection, settlement_id: str, kinds: Sequence[str], now: int, reason: str
) -> int:
    """Cancel the settlement's not yet delivered commit-channel rows of ``kinds``."""
    d = s.deliveries
    result = conn.execute(
        update(d)
        .where(
            d.c.settlement_id == settlement_id,
            d.c.channel == COMMIT_CHANNEL,
            d.c.kind.in_(list(kinds)),
            d.c.state.in_([PENDING, SENDING]),
        )
        .values(state=CANCELLED, last_error=reason, updated_at=now)
    )
    return int(result.rowcount)


def retire_commit(conn: Connection, key: str, archive_as: str, now: int, reason: str) -> str | None:
    """A finality violation took the ground from under the commit row ``key``: the state it
    was in (None: no such row).

    Not sent yet (``pending``, or ``dead`` awaiting a replay): cancelled, keeping its key, so
    a new confirmation revives it. Sent or being sent (``sending``, ``delivered``): renamed
    to ``archive_as`` and otherwise left alone (an attempt in flight still records its
    outcome, and holds back the settlement's newer rows until it does), which frees ``key``
    for the commit of a new confirmation: a new row, ordered after the violation."""
    d = s.deliveries
    row = conn.execute(select(d.c.id, d.c.state).where(d.c.idempotency_key == key)).first()
    if row is None:
        return None
    state = str(row[1])
    if state in (PENDING, DEAD):
        values: dict[str, Any] = {"state": CANCELLED, "last_error": reason}
    elif state in (SENDING, DELIVERED):
        values = {"idempotency_key": archive_as}
    else:
        return state
    conn.execute(update(d).where(d.c.id == row[0]).values(updated_at=now, **values))
    return state


# -- the sender's and the API's side -----------------------------------------------------------


class Outbox:
    """Operations on the outbox with their own transactions (sender, API, CLI, metrics)."""

    def __init__(self, writer: Engine, reader: Engine) -> None:
        self._writer = writer
        self._reader = reader
        self.dialect = writer.dialect.name

    # -- claiming ------------------------------------------------------------------------

    def claim(self, now: int, limit: int, lease_ms: int) -> list[DeliveryRecord]:
        """Take up to ``limit`` due rows: mark them ``sending`` until ``now + lease_ms``.

        Due are ``sending`` rows whose lease ended (a crashed or hung attempt: first, so they
        are not starved), then ``pending`` rows not held back by an older undelivered row of
        the same settlement (commit channel); each set is an index range scan in
        ``next_attempt_at`` order, never a sort of the whole backlog."""
        params = {"now": now, "lim": limit, "lease_end": now + lease_ms}
        with self._writer.begin() as conn:
            if self.dialect == "postgresql":
                # Rows another instance is claiming right now are skipped, not waited for.
                ids = list(conn.execute(_PG_EXPIRED, params).scalars())
                if len(ids) < limit:
                    ids += conn.execute(_PG_PENDING, {**params, "lim": limit - len(ids)}).scalars()
                if not ids:
                    return []
                rows = conn.execute(_PG_CLAIM, {**params, "ids": ids})
            else:
                # One claiming UPDATE; BEGIN IMMEDIATE has taken the write lock already.
                rows = conn.execute(_SQLITE_CLAIM, params)
            records = [from_row(DeliveryRecord, r) for r in rows.mappings()]
        return sorted(records, key=lambda r: r.id)

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
        held = _PG_HELD if self.dialect == "postgresql" else _HELD
        with self._writer.begin() as conn:
            ids = [o.rec.id for o in outcomes]
            current = {int(r[0]): int(r[1]) for r in conn.execute(held, {"ids": ids})}
            mine = [o for o in outcomes if current.get(o.rec.id) == o.rec.attempts]
            if mine:
                conn.execute(_FINISH, [o.params() for o in mine])
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

    def get(self, delivery_id: int) -> DeliveryRecord:
        """One delivery; raises :class:`DeliveryNotFound`."""
        d = s.deliveries
        with self._reader.connect() as conn:
            row = conn.execute(select(d).where(d.c.id == delivery_id)).mappings().first()
        if row is None:
            raise DeliveryNotFound(delivery_id)
        return from_row(DeliveryRecord, row)

    def list(
        self,
        state: str | None = None,
        settlement_id: str | None = None,
        after_id: int = 0,
        limit: int = 100,
    ) -> list[DeliveryRecord]:
        """Deliveries in id order, optionally filtered by state and settlement."""
        d = s.deliveries
        query = select(d).where(d.c.id > after_id).order_by(d.c.id).limit(limit)
        if state is not None:
            query = query.where(d.c.state == state)
        if settlement_id is not None:
            query = query.where(d.c.settlement_id == settlement_id)
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
                "body": _sql_body(n.body),
                "created_at": now,
                "updated_at": now,
            }
            for n in news
        ]
        with self._writer.begin() as conn:
            conn.execute(insert(s.deliveries), rows)

    # -- what a body is assembled from ----------------------------------------------------------

    def event(self, event_id: int) -> tuple[dict[str, Any], int] | None:
        """(payload, created_at) of a stored event: the decision a commit or discard reports."""
        e = s.events
        with self._reader.connect() as conn:
            row = conn.execute(
                select(e.c.payload, e.c.created_at).where(e.c.id == event_id)
            ).first()
        return None if row is None else (dict(row[0]), int(row[1]))

    def last_event_id(self) -> int:
        """The newest event's id (0 when there is none)."""
        e = s.events
        with self._reader.connect() as conn:
            value = conn.execute(select(func.max(e.c.id))).scalar()
        return 0 if value is None else int(value)

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
