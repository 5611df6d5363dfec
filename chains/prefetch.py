"""The next blocks of a catch-up, asked while the engine applies the blocks of this poll.

A catch-up after downtime alternates two kinds of waiting: the node building the answers of
a poll's blocks (``eth_getBlockByNumber`` of up to ``max_blocks_per_poll`` heights) and the
engine applying them. They need not wait for each other: while the engine applies a poll's
blocks, :class:`BlockPrefetch` asks the node for the next poll's heights in a background
thread, and the next poll takes the answers instead of asking again. On two cores the node
works while the engine does (a catch-up's wall time was the sum of both).

Nothing is believed earlier than before. Only the node's raw answers are held (each
checked to answer its height, as any batch is: :meth:`chains.rpc.RpcClient.batch`); they
are parsed (and their header re-hashed, and seen by the block observers) by the poll that
takes them, in order, on the engine's thread. The head tracker treats them as blocks it
fetched itself, with one more rule (:meth:`chains.tracker.HeadTracker._fetch_range`): the
taken blocks must link up to a block fetched *in this poll*, after its ``latest`` (the
poll's ``latest`` itself, or the range's last height asked again), else every height is
asked again. So the blocks a poll hands on are ancestors of what the node said in that
poll, exactly as when it fetched them all: a reorg while they were held is never applied as
if it had not happened.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from chains.errors import ChainError, ChainInconsistent
from chains.models import Block
from chains.rpc import RpcClient
from chains.transport import Call

METHOD = "eth_getBlockByNumber"


class BlockPrefetch:
    """At most one background fetch of consecutive heights (full blocks) of one client."""

    def __init__(self, client: RpcClient) -> None:
        self.client = client
        self._thread: threading.Thread | None = None
        self._first: int | None = None
        self._raws: dict[int, Mapping[str, Any]] = {}

    def start(self, numbers: Sequence[int], max_batch: int | None) -> None:
        """Ask for the full blocks ``numbers`` (consecutive, ascending) in the background;
        whatever was held before is dropped."""
        self.drop()
        if not numbers:
            return
        self._first = numbers[0]
        calls: list[Call] = [(METHOD, [hex(n), True]) for n in numbers]
        held: dict[int, Mapping[str, Any]] = {}

        def fetch() -> None:
            try:
                answers = self.client.batch(calls, max_batch)
            except ChainError:
                return  # the poll that takes nothing asks again, and sees the error itself
            held.update(
                (n, raw) for n, raw in zip(numbers, answers, strict=True) if isinstance(raw, dict)
            )

        self._raws = held
        self._thread = threading.Thread(target=fetch, name="block-prefetch", daemon=True)
        self._thread.start()

    def take(self, first: int) -> dict[int, Mapping[str, Any]]:
        """The raw blocks held by height, if the fetch started at ``first`` (waiting for it
        to end); else nothing. Either way nothing is held afterwards."""
        thread, started, raws = self._thread, self._first, self._raws
        self._thread, self._first, self._raws = None, None, {}
        if thread is None:
            return {}
        thread.join()
        return raws if started == first else {}

    def wait(self) -> None:
        """Wait until the fetch under way (if any) has its answers (they stay held)."""
        if self._thread is not None:
            self._thread.join()

    def drop(self) -> None:
        """Forget what is held (a fetch under way ends on its own, unread)."""
        self._thread, self._first, self._raws = None, None, {}


def blocks_of(
    client: RpcClient,
    chain: str,
    numbers: Sequence[int],
    max_batch: int | None,
    held: Mapping[int, Mapping[str, Any]] | None = None,
) -> list[Block]:
    """The full blocks ``numbers``: those ``held`` (raw answers asked ahead) parsed now,
    the others asked now (batched); ChainInconsistent when the node has one no longer."""
    held = held or {}
    asked = [n for n in numbers if n not in held]
    fetched = dict(zip(asked, client.blocks(asked, True, max_batch), strict=True))
    blocks: list[Block] = []
    for number in numbers:
        raw = held.get(number)
        block = fetched[number] if raw is None else client.parse_block(raw, METHOD)
        if block is None:
            raise ChainInconsistent(f"{chain}: node lost block {number} below its head")
        blocks.append(block)
    return blocks
