"""The outbox's prepared statements, built once: SQLAlchemy then reuses their compiled
form (building them per call cost more than running them)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    BindParameter,
    Integer,
    bindparam,
    exists,
    select,
    union_all,
    update,
)

from watcher.store import schema as s
from watcher.store.outbox_states import COMMIT_CHANNEL, DEAD, PENDING, SENDING

FINISH = (
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


BURY_OVER_CAP = (
    update(s.deliveries)
    .where(
        s.deliveries.c.state.in_([PENDING, SENDING]),
        s.deliveries.c.next_attempt_at <= bindparam("now", type_=BigInteger),
        s.deliveries.c.attempts >= bindparam("max_attempts", type_=Integer),
    )
    .values(
        state=DEAD,
        last_error=bindparam("why"),
        updated_at=bindparam("now", type_=BigInteger),
    )
    .returning(*s.deliveries.c)
)
"""Due rows that already had every attempt they may: dead, never claimed again (a row
whose last attempt outlived its lease would otherwise be claimed for ever)."""

CLAIM = _claim_statements()
SQLITE_CLAIM = CLAIM["sqlite"]
PG_EXPIRED = CLAIM["pg_expired"]
PG_PENDING = CLAIM["pg_pending"]
PG_CLAIM = CLAIM["pg_claim"]
HELD = select(s.deliveries.c.id, s.deliveries.c.attempts).where(
    s.deliveries.c.id.in_(bindparam("ids", expanding=True)), s.deliveries.c.state == SENDING
)
PG_HELD = HELD.with_for_update()
