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
from collections.abc import Callable

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
    by_number = {r[0]: r for r in rows}
    for number, wanted in ((first, first_hash), head):
        row = by_number.get(number)
        if row is not None and row[1] != wanted:
            raise BranchMoved(f"block {number} is no longer {wanted}: the chain moved, waiting")
    wanted_rows = [by_number.get(n) for n in range(first, last + 1)]
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
    for below, above in itertools.pairwise(headers):
        if above["parentHash"] != below["hash"]:
            return None
    return headers
