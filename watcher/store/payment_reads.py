"""A block's reads of payments and deposits, on the driver's cursor (watcher/store/driver_sql.py).

A block finalizing 1,000 deposits reads them three times over (what is due, their specs,
their counted transfers): through SQLAlchemy's execution and row mappings those reads cost
about a sixth of the block. Here each statement is built once (bound parameters
``q_<name>``, no expanding list: a list of ids is read in the sizes of
:data:`~watcher.store.block_queries.ID_BUCKETS`, padded with its last id, as
:meth:`~watcher.store.block_txn.BlockTxn.by_ids` does) and run on the driver connection of
the block's transaction; the rows are the same values SQLAlchemy gives.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Select, and_, bindparam, literal, or_, select

from guard.payment import ADDRESS_KINDS, DEPOSIT_KIND, PAYMENT_KIND
from watcher.store import schema as s
from watcher.store.block_queries import ID_BUCKETS
from watcher.store.block_txn import BlockTxn
from watcher.store.conditions import deadline_reasons_at
from watcher.store.driver_sql import statement

_t, _x, _p = s.settlements, s.payment_transfers, s.payment_specs


def _param(name: str, column: Any) -> Any:
    return bindparam("q_" + name, type_=column.type)


def _kind(value: str) -> Any:
    return literal(value, _t.c.kind.type)


@functools.cache
def _due(with_finalized: bool, with_safe: bool) -> Select[Any]:
    """:func:`~watcher.store.payments_store.payments_due` as one statement built once."""
    own = _x.c.settlement_id == _t.c.settlement_id
    ripe = [
        _x.c.block_number + _t.c.required_confirmations - 1 <= _param("head", _x.c.block_number)
    ]
    if with_finalized:
        ripe.append(_x.c.block_number <= _param("finalized", _x.c.block_number))
    if with_safe:
        ripe.append(_x.c.block_number <= _param("safe", _x.c.block_number))
    return (
        select(_t)
        .where(
            _t.c.chain == _param("chain", _t.c.chain),
            _t.c.kind.in_([_kind(k) for k in sorted(ADDRESS_KINDS)]),
            _t.c.watching.is_(True),
            or_(
                and_(_t.c.kind == _kind(PAYMENT_KIND), select(_x.c.id).where(own).exists()),
                and_(
                    _t.c.kind == _kind(DEPOSIT_KIND),
                    select(_x.c.id).where(own, or_(*ripe)).exists(),
                ),
                *deadline_reasons_at(_param("now", _t.c.deadline), _param("cut", _t.c.deadline)),
            ),
        )
        .order_by(_t.c.seq)
    )


def due_rows(
    txn: BlockTxn, late_watch_ms: int, head: int, finalized: int | None, safe: int | None
) -> list[dict[str, Any]]:
    """The rows :func:`~watcher.store.payments_store.payments_due` reads."""
    values: dict[str, Any] = {
        "q_chain": txn.chain,
        "q_head": head,
        "q_now": txn.now,
        "q_cut": txn.now - late_watch_ms,
    }
    if finalized is not None:
        values["q_finalized"] = finalized
    if safe is not None:
        values["q_safe"] = safe
    key = ("payments_due", finalized is not None, safe is not None)
    build = functools.partial(_due, finalized is not None, safe is not None)
    return statement(txn.conn, key, build).rows(txn.conn, values)


@functools.cache
def _specs(size: int) -> Select[Any]:
    ids = [_param(f"id{i}", _p.c.settlement_id) for i in range(size)]
    return select(_p).where(_p.c.settlement_id.in_(ids))


@functools.cache
def _transfers(size: int) -> Select[Any]:
    ids = [_param(f"id{i}", _x.c.settlement_id) for i in range(size)]
    order = (_x.c.block_number, _x.c.tx_index, _x.c.log_index, _x.c.id)
    return select(_x).where(_x.c.settlement_id.in_(ids)).order_by(*order)


def spec_rows(txn: BlockTxn, ids: Sequence[str]) -> list[dict[str, Any]]:
    """The ``payment_specs`` rows of ``ids``."""
    return _by_ids(txn, "payment_specs_by_ids", _specs, ids)


def transfer_rows(txn: BlockTxn, ids: Sequence[str]) -> list[dict[str, Any]]:
    """The ``payment_transfers`` rows of ``ids``, each settlement's in chain order (block,
    tx, log: a settlement's ids are all in one statement, ordered so)."""
    return _by_ids(txn, "payment_transfers_by_ids", _transfers, ids)


def _by_ids(
    txn: BlockTxn, key: str, build: Callable[[int], Select[Any]], ids: Sequence[str]
) -> list[dict[str, Any]]:
    unique = list(dict.fromkeys(ids))
    top = ID_BUCKETS[-1]
    out: list[dict[str, Any]] = []
    for start in range(0, len(unique), top):
        part = unique[start : start + top]
        size = next(b for b in ID_BUCKETS if b >= len(part))
        part += [part[-1]] * (size - len(part))  # a repeated id selects nothing more
        read = statement(txn.conn, (key, size), functools.partial(build, size))
        out += read.rows(txn.conn, {f"q_id{i}": sid for i, sid in enumerate(part)})
    return out
