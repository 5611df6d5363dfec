"""The statements a block transaction runs for every block, built once.

A catch-up applies thousands of blocks in a few transactions; building a SQLAlchemy
statement (coercing its clauses, computing its cache key) cost more than running it on
SQLite: a third of a catch-up's CPU. The statements here are built once, with bound
parameters ``q_<name>``, and executed with each block's values. Their conditions are
those of :mod:`watcher.store.conditions` (one definition each).
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import (
    Delete,
    Insert,
    Select,
    Update,
    bindparam,
    delete,
    insert,
    literal,
    or_,
    select,
    update,
)

from guard.payment import ADDRESS_KINDS
from guard.settlement import Verdict
from watcher.store import schema as s
from watcher.store.conditions import deadline_reasons_at, finality_reasons, watched_in

_t = s.settlements
_h = s.headers


def param(name: str, column: Any) -> Any:
    """A bound parameter ``q_<name>`` of ``column``'s type."""
    return bindparam("q_" + name, type_=column.type)


def _of_chain(*conditions: Any) -> Select[Any]:
    """The chain's settlements (``q_chain``) meeting ``conditions``, in registration order."""
    return (
        select(_t).where(_t.c.chain == param("chain", _t.c.chain), *conditions).order_by(_t.c.seq)
    )


@functools.cache
def due(with_finalized: bool) -> Select[Any]:
    """:meth:`~watcher.store.block_txn.BlockTxn.due`: ``q_head``, ``q_now``, ``q_cut`` (the
    end of the late watch: now - late watch) and, ``with_finalized``, ``q_finalized``."""
    finalized = param("finalized", _t.c.block_number) if with_finalized else None
    reasons = [
        *finality_reasons(param("head", _t.c.confirm_height), finalized),
        *deadline_reasons_at(param("now", _t.c.deadline), param("cut", _t.c.deadline)),
    ]
    # The chain and ``watching``: conditions of every part of _may_be_due (see due_span).
    narrowed = select(_t).where(
        _t.c.seq.in_(_may_be_due(with_finalized)), _t.c.kind.not_in(ADDRESS_KINDS), or_(*reasons)
    )
    return narrowed.order_by(_t.c.seq)


def _not_address() -> Any:
    """Not an address watch, as literal values (not an expanding list: the driver's cursor
    runs :func:`due_span`)."""
    return _t.c.kind.not_in([literal(k, _t.c.kind.type) for k in ADDRESS_KINDS])


@functools.cache
def due_span(with_finalized: bool) -> Select[Any]:
    """:meth:`~watcher.store.block_txn.BlockTxn.due_span`: :func:`due` at ``q_head``, each
    row with ``due_first``: whether it is due at ``q_first`` (a lower head, the same time
    and ``finalized`` height) already. The same conditions, asked at both heights; without
    a ``finalized`` height, on the rows :func:`_may_be_due` finds."""
    finalized = param("finalized", _t.c.block_number) if with_finalized else None
    deadline = deadline_reasons_at(param("now", _t.c.deadline), param("cut", _t.c.deadline))
    at_head = or_(*finality_reasons(param("head", _t.c.confirm_height), finalized), *deadline)
    at_first = or_(*finality_reasons(param("first", _t.c.confirm_height), finalized), *deadline)
    due_first = at_first.label("due_first")
    # The chain and ``watching`` are conditions of every part of _may_be_due: not asked here
    # again, so that SQLite reads the rows it names instead of walking the watched ones.
    narrowed = select(_t).where(_t.c.seq.in_(_may_be_due(with_finalized)), _not_address(), at_head)
    return narrowed.order_by(_t.c.seq).add_columns(due_first)


def _may_be_due(with_finalized: bool) -> Any:
    """The chain's watched settlements that may be due at ``q_head`` (and, ``with_finalized``,
    the ``q_finalized`` height): a superset (:func:`due` and :func:`due_span` ask their own
    conditions of them), each reason's through an index of its own: the depth reached
    (``ix_settlements_confirm``), a deadline passed by ``q_now`` or by ``q_cut``
    (``ix_settlements_deadline``), an inclusion or replacing tx at or below the finalized
    height (``ix_settlements_watched_block``, ``ix_settlements_watched_replaced``). Asked
    with the reasons or'ed, SQLite walked every watched row of the chain at every watched
    block of a catch-up (1,000 queries over up to 1,000 rows: the largest part of its
    writes), and at every block every deposit awaiting a ``finalized`` tag (64,000 on
    Ethereum at 1,000 a block)."""
    ranges = [
        _t.c.confirm_height <= param("head", _t.c.confirm_height),
        _t.c.deadline <= param("now", _t.c.deadline),
        _t.c.deadline <= param("cut", _t.c.deadline),
    ]
    if with_finalized:
        finalized = param("finalized", _t.c.block_number)
        ranges += [_t.c.block_number <= finalized, _t.c.replaced_block_number <= finalized]
    return watched_in(param("chain", _t.c.chain), ranges)


ID_BUCKETS = (1, 4, 16, 64, 256)
"""The list sizes :func:`by_id_list` is built for: a list is padded up to the next (its last id
repeated), a longer one read in slices of the largest."""


@functools.cache
def by_id_list(size: int) -> Select[Any]:
    """:meth:`~watcher.store.block_txn.BlockTxn.by_ids`: the chain's settlements of the ids
    ``q_id0``... (``size`` of them, no literal value: compiled once, run on the driver's
    cursor, which takes no expanding list)."""
    ids = [param(f"id{i}", _t.c.settlement_id) for i in range(size)]
    return _of_chain(_t.c.settlement_id.in_(ids))


@functools.cache
def provisional_in_progress() -> Select[Any]:
    """Included, still awaiting, provisional settlements with a commit URL."""
    return _of_chain(
        _t.c.watching.is_(True),
        _t.c.confirm_height.is_not(None),
        _t.c.block_number.is_not(None),
        _t.c.provisional.is_(True),
        _t.c.verdict == Verdict.AWAITING_FINALITY,
        _t.c.commit_url.is_not(None),
    )


@functools.cache
def headers_from() -> Delete:
    """Drop the chain's stored headers at or above ``q_number``."""
    return delete(_h).where(
        _h.c.chain == param("chain", _h.c.chain), _h.c.number >= param("number", _h.c.number)
    )


@functools.cache
def headers_up_to() -> Delete:
    """Drop the chain's stored headers at or below ``q_number`` (the window's pruning)."""
    return delete(_h).where(
        _h.c.chain == param("chain", _h.c.chain), _h.c.number <= param("number", _h.c.number)
    )


@functools.cache
def move_head() -> Update:
    """The chain's head pointer to ``q_number``, ``q_hash`` at ``q_now``."""
    c = s.chains.c
    return (
        update(s.chains)
        .where(c.name == param("chain", c.name))
        .values(
            head_number=param("number", c.head_number),
            head_hash=param("hash", c.head_hash),
            updated_at=param("now", c.updated_at),
        )
    )


@functools.cache
def insert_headers() -> Insert:
    """Insert header rows (each row's values by column name)."""
    return insert(_h)
