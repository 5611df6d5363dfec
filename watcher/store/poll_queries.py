"""The reads every poll makes, new block or not, built once.

An idle chain is polled every interval, and each poll asks the store the same questions:
anything registered since the last look (settlements, payments, watched addresses, the
subscriptions matched), any look-up or deadline due, any event that calls for a receipt.
Building each SQLAlchemy statement anew (coercing its clauses, computing its cache key)
cost about as much as running it on SQLite: a fifth of an idle poll's CPU. These are built
once, with bound parameters ``q_<name>``, as the block transaction's are
(:mod:`watcher.store.block_queries`).
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import Select, bindparam, or_, select, text

from guard.payment import PAYMENT_KIND
from watcher.store import schema as s
from watcher.store.block_queries import param as _param
from watcher.store.conditions import deadline_reasons_at
from watcher.store.schema import WATCHED_TXS

_t = s.settlements


@functools.cache
def watch_entries() -> Select[Any]:
    """Watched settlements of ``q_chain`` after ``q_seq``, in order (payments apart)."""
    return (
        select(
            _t.c.seq, _t.c.settlement_id, _t.c.tx_hash, _t.c.sender, _t.c.nonce, _t.c.block_number
        )
        .where(
            _t.c.chain == _param("chain", _t.c.chain),
            _t.c.seq > _param("seq", _t.c.seq),
            # Watched, not an address watch (payments: watcher/engine/payments.py), in the
            # words of ix_settlements_watched_txs, so that it is read by that index: by the
            # (chain, watching) one, a poll walked every deposit awaiting finality.
            text(WATCHED_TXS),
        )
        .order_by(_t.c.seq)
    )


@functools.cache
def due_probes() -> Select[Any]:
    """Watched settlements of ``q_chain`` to look up by hash at ``q_now``, oldest probe time
    first, at most ``q_limit``."""
    return (
        select(_t)
        .where(
            _t.c.chain == _param("chain", _t.c.chain),
            _t.c.watching.is_(True),
            _t.c.block_number.is_(None),
            or_(_t.c.sender.is_(None), _t.c.probe_count == 0),
            _t.c.next_probe_at <= _param("now", _t.c.next_probe_at),
        )
        .order_by(_t.c.next_probe_at)
        .limit(bindparam("q_limit"))
    )


@functools.cache
def any_deadline_due() -> Select[Any]:
    """One watched settlement of ``q_chain`` with a time-only change due at ``q_now``
    (``q_cut``: now - the late watch)."""
    reasons = deadline_reasons_at(_param("now", _t.c.deadline), _param("cut", _t.c.deadline))
    return (
        select(_t.c.seq)
        .where(_t.c.chain == _param("chain", _t.c.chain), _t.c.watching.is_(True), or_(*reasons))
        .limit(1)
    )


def payment_watch_query(chain: Any, *conditions: Any) -> Select[Any]:
    """Payments of ``chain`` (a value or a bound parameter) meeting ``conditions``, with
    their specs, in order: what the engine's payment index is built from."""
    p = s.payment_specs
    return (
        select(_t.c.seq, _t.c.settlement_id, p.c.to_address, p.c.asset, p.c.sender, p.c.after_block)
        .join(p, p.c.settlement_id == _t.c.settlement_id)
        .where(_t.c.chain == chain, _t.c.kind == PAYMENT_KIND, *conditions)
        .order_by(_t.c.seq)
    )


@functools.cache
def payment_watches() -> Select[Any]:
    """Watched payments of ``q_chain`` after ``q_seq``, with their specs, in order."""
    return payment_watch_query(
        _param("chain", _t.c.chain), _t.c.watching.is_(True), _t.c.seq > _param("seq", _t.c.seq)
    )


@functools.cache
def address_watches() -> Select[Any]:
    """Watched addresses of ``q_chain`` after ``q_seq``, in order."""
    a = s.subscription_addresses
    return (
        select(a.c.seq, a.c.subscription_id, a.c.address, a.c.after_block)
        .where(a.c.chain == _param("chain", a.c.chain), a.c.seq > _param("seq", a.c.seq))
        .order_by(a.c.seq)
    )


@functools.cache
def matched_subscriptions() -> Select[Any]:
    """The subscriptions of ``q_chain`` the engine matches: active, or deleted with a
    deposit still watched."""
    t, d = s.subscriptions, s.deposits
    chain = _param("chain", t.c.chain)
    pending = (
        select(d.c.subscription_id)
        .join(_t, _t.c.settlement_id == d.c.settlement_id)
        .where(d.c.chain == chain, _t.c.watching.is_(True))
    )
    return select(t).where(
        t.c.chain == chain,
        or_(t.c.active.is_(True), t.c.subscription_id.in_(pending.distinct())),
    )


@functools.cache
def terminal_events(kinds: tuple[str, ...]) -> Select[Any]:
    """Events of ``q_chain`` of ``kinds`` about a settlement after ``q_id``, in order, at
    most ``q_limit``."""
    e = s.events
    return (
        select(e.c.id, e.c.settlement_id, e.c.kind, e.c.payload)
        .where(
            e.c.id > _param("id", e.c.id),
            e.c.chain == _param("chain", e.c.chain),
            e.c.kind.in_(list(kinds)),
            e.c.settlement_id.is_not(None),
        )
        .order_by(e.c.id)
        .limit(bindparam("q_limit"))
    )
