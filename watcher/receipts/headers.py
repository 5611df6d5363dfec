"""A receipt's header chain from the store's window, not from the node.

The engine stores every block it processes with all the fields of its hash (the ``compact``
column, chains/block_facts.py), in the block's own transaction. A receipt for a decision
made at head H about a tx in block B carries the headers B .. B + min(H - B + 1, N) - 1:
they are all in the window (registration refuses N at or above the window), so the chain
is read in one query and costs no JSON-RPC call.

The store is the tracker's view of the chain: if it no longer has the decision's block or
head under their hashes, the chain moved since the decision (a reorg the engine recorded)
and :class:`~chains.proofs.BranchMoved` says wait, exactly as the node would. When it
cannot serve (heights pruned, rows from before migration 0006, a header this version cannot
re-hash) the caller falls back to the node.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

from chains.block_facts import header_from_compact
from chains.proofs import BranchMoved

HeaderRows = Callable[[str, int, int], list[tuple[int, str, str, bytes | None]]]
"""``(chain, first, last)`` → stored (number, hash, parent hash, compact) rows, ascending
(:meth:`watcher.store.Store.compact_headers`)."""


def stored_chain(
    rows_of: HeaderRows,
    chain: str,
    first: int,
    count: int,
    first_hash: str,
    head: tuple[int, str],
) -> list[dict[str, str]] | None:
    """The ``count`` header objects from block ``first`` up, read from the store; None when
    the store cannot give them all (the caller asks the node). Raises BranchMoved when the
    stored chain holds another block at ``first`` or at the decision's ``head``."""
    last = first + count - 1
    rows = rows_of(chain, first, max(last, head[0]))
    headers = _headers(rows, range(first, last + 1), first_hash, head)
    if headers is None:
        return None
    for below, above in itertools.pairwise(headers):
        if above["parentHash"] != below["hash"]:
            return None
    return headers


def head_linked(
    rows_of: HeaderRows | None, chain: str, top: tuple[int, str], head: tuple[int, str]
) -> bool:
    """Whether the store's window holds the decision's ``head`` under its hash, linked by
    parent hash, height after height, down to ``top`` (number, hash): the last header of a
    chain kept below the head (watcher/receipts/spans.py). The head being stored is not
    enough: a span kept from another branch would end on a block the head does not descend
    from."""
    if rows_of is None or head[0] <= top[0]:
        return False
    rows = rows_of(chain, top[0] + 1, head[0])
    below = top[1]
    for number, row in enumerate(rows, start=top[0] + 1):
        if row[0] != number or row[2] != below:
            return False
        below = row[1]
    return len(rows) == head[0] - top[0] and below == head[1]


def stored_ends(
    rows_of: HeaderRows,
    chain: str,
    first: int,
    count: int,
    first_hash: str,
    head: tuple[int, str],
) -> list[dict[str, str]] | None:
    """The header objects of block ``first`` and of block ``first + count - 1`` only (what
    a history proof needs: watcher/receipts/ancestry.py), read from the store; None and
    BranchMoved as :func:`stored_chain`. The link between them is the proof's to show."""
    last = first + count - 1
    rows = [
        row for number in sorted({first, last, head[0]}) for row in rows_of(chain, number, number)
    ]
    return _headers(rows, (first, last), first_hash, head)


def _headers(
    rows: list[tuple[int, str, str, bytes | None]],
    numbers: Iterable[int],
    first_hash: str,
    head: tuple[int, str],
) -> list[dict[str, str]] | None:
    """The header objects of ``numbers`` (the first is the decision's block) from ``rows``;
    BranchMoved when a row holds another block at the decision's block or head; None when
    a row is missing or does not give back its block."""
    by_number = {r[0]: r for r in rows}
    wanted = list(numbers)
    for number, block_hash in ((wanted[0], first_hash), head):
        row = by_number.get(number)
        if row is not None and row[1] != block_hash:
            raise BranchMoved(f"block {number} is no longer {block_hash}: the chain moved, waiting")
    wanted_rows = [by_number.get(n) for n in wanted]
    if head[0] not in by_number or any(r is None or r[3] is None for r in wanted_rows):
        return None
    headers: list[dict[str, str]] = []
    for row in wanted_rows:
        assert row is not None and row[3] is not None
        try:
            header = header_from_compact(row[3])
        except ValueError:
            return None
        if header["hash"] != row[1]:
            return None  # not the row's block: let the node answer
        headers.append(header)
    return headers
