"""Head tracking and reorg detection for one chain.

The tracker keeps a window of recent canonical headers (:class:`HeaderWindow`) and, on each
poll, asks the node for its ``latest`` block with transactions: **one JSON-RPC call** when one
new block arrived. From that single answer it decides:

* same hash as our head → nothing new;
* a lower height whose hash we already hold → the node lags (a load-balanced node behind the
  others): not a reorg, nothing to do, reported as ``lagging``;
* the next block linking to our head → one new block;
* a higher block → the gap is fetched in batched requests and must link up;
* a block that does not link → a reorg: the common ancestor is found by walking back
  (batched) and comparing hashes with the window; the new branch is fetched from there.

:meth:`HeadTracker.poll` only reads; the caller commits each block's effects and then moves
the window (:meth:`HeaderWindow.rewind_to`, :meth:`HeaderWindow.push`), so the window in
memory never runs ahead of what the store holds.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from chains.errors import ChainInconsistent, ReorgTooDeep
from chains.models import Block, BlockHeader
from chains.rpc import RpcClient
from guard.types import BlockHash, BlockNumber


@dataclass(frozen=True, slots=True)
class ReplacedBlock:
    """One height whose block a reorg replaced."""

    number: BlockNumber
    """The height."""
    old_hash: BlockHash
    """The hash we had followed."""
    new_hash: BlockHash | None
    """The hash now canonical there; None when the new branch is shorter (or not yet fetched)."""


@dataclass(frozen=True, slots=True)
class Reorg:
    """A switch of the canonical chain away from blocks we had followed."""

    depth: int
    """How many of our blocks were replaced (old head - common ancestor)."""
    common_ancestor: BlockHeader
    """Highest block both branches share."""
    old_head: BlockHeader
    """Our head before the switch."""
    replaced: tuple[ReplacedBlock, ...]
    """Each replaced height, old and new hash."""


@dataclass(frozen=True, slots=True)
class Advance:
    """What one poll found: new canonical blocks to process in order, maybe after a reorg."""

    node_head: BlockHeader
    """The node's ``latest`` as answered in this poll."""
    blocks: tuple[Block, ...] = ()
    """New canonical blocks, ascending, each linking to the one before (the first to the
    window head, or to ``reorg.common_ancestor``)."""
    reorg: Reorg | None = None
    """Set when the blocks replace some we had followed."""
    lagging: bool = False
    """The node's head is below ours on the same chain: not a reorg; nothing to do."""

    @property
    def behind(self) -> int:
        """Blocks still to fetch after these (non-zero while catching up)."""
        last = self.blocks[-1].header.number if self.blocks else self.node_head.number
        return max(0, self.node_head.number - last)


class HeaderWindow:
    """Recent canonical headers by height, contiguous, at most ``capacity`` of them."""

    def __init__(self, capacity: int, headers: Iterable[BlockHeader] = ()) -> None:
        if capacity < 2:
            raise ValueError(f"header window capacity must be >= 2, got {capacity}")
        self.capacity = capacity
        self._by_number: dict[int, BlockHeader] = {}
        self.reset(headers)

    def reset(self, headers: Iterable[BlockHeader]) -> None:
        """Replace the content with ``headers`` (which must link up)."""
        self._by_number.clear()
        for header in sorted(headers, key=lambda h: h.number):
            self.push(header)

    def __len__(self) -> int:
        return len(self._by_number)

    @property
    def head(self) -> BlockHeader | None:
        """Highest header held, None when empty."""
        return self._by_number[max(self._by_number)] if self._by_number else None

    @property
    def bottom(self) -> BlockNumber | None:
        """Lowest height held, None when empty."""
        return BlockNumber(min(self._by_number)) if self._by_number else None

    def get(self, number: int) -> BlockHeader | None:
        """The header held at ``number``, if any."""
        return self._by_number.get(number)

    def headers(self) -> list[BlockHeader]:
        """All held headers, ascending."""
        return [self._by_number[n] for n in sorted(self._by_number)]

    def push(self, header: BlockHeader) -> None:
        """Append the next header; it must link to the head. Drops the oldest past capacity."""
        head = self.head
        if head is not None and (
            header.number != head.number + 1 or header.parent_hash != head.hash
        ):
            raise ChainInconsistent(
                f"block {header.number} ({header.hash}) does not link to head "
                f"{head.number} ({head.hash})"
            )
        self._by_number[header.number] = header
        while len(self._by_number) > self.capacity:
            del self._by_number[min(self._by_number)]

    def rewind_to(self, number: int) -> None:
        """Forget every header above ``number`` (the common ancestor of a reorg)."""
        for n in [n for n in self._by_number if n > number]:
            del self._by_number[n]


class HeadTracker:
    """Finds new canonical blocks and reorgs for one chain, reading through ``client``."""

    def __init__(
        self, chain: str, client: RpcClient, window: HeaderWindow, max_blocks_per_poll: int = 500
    ) -> None:
        self.chain = chain
        self.client = client
        self.window = window
        self.max_blocks_per_poll = max_blocks_per_poll

    def poll(self) -> Advance:
        """Ask the node once for ``latest`` and work out what changed. Does not move the window."""
        latest = self.client.block("latest", full=True)
        if latest is None:
            raise ChainInconsistent(f"{self.chain}: node has no latest block")
        node_head = latest.header
        head = self.window.head
        if head is None:
            return Advance(node_head=node_head, blocks=(latest,))
        if node_head.hash == head.hash:
            return Advance(node_head=node_head)
        if node_head.number < head.number:
            held = self.window.get(node_head.number)
            if held is not None and held.hash == node_head.hash:
                return Advance(node_head=node_head, lagging=True)
        if node_head.number == head.number + 1 and node_head.parent_hash == head.hash:
            return Advance(node_head=node_head, blocks=(latest,))
        if node_head.number > head.number:
            gap = self._fetch_range(head.number + 1, node_head.number, latest)
            if gap[0].header.parent_hash == head.hash:
                _check_links(self.chain, gap)
                return Advance(node_head=node_head, blocks=tuple(gap))
        return self._reorg(head, latest)

    def _fetch_range(self, first: int, node_head: int, latest: Block) -> list[Block]:
        """Blocks ``first``.. up to ``max_blocks_per_poll`` of them, reusing ``latest``."""
        last = min(node_head, first + self.max_blocks_per_poll - 1)
        numbers = list(range(first, last + 1))
        if last == node_head:
            numbers.pop()
        fetched = self.client.blocks(numbers, full=True) if numbers else []
        blocks: list[Block] = []
        for number, block in zip(numbers, fetched, strict=True):
            if block is None:
                raise ChainInconsistent(f"{self.chain}: node lost block {number} below its head")
            blocks.append(block)
        if last == node_head:
            blocks.append(latest)
        return blocks

    def _reorg(self, head: BlockHeader, latest: Block) -> Advance:
        ancestor = self._common_ancestor(min(head.number, latest.header.number))
        branch = self._fetch_range(ancestor.number + 1, latest.header.number, latest)
        if branch and branch[0].header.parent_hash != ancestor.hash:
            raise ChainInconsistent(
                f"{self.chain}: block {branch[0].header.number} does not link to the common "
                f"ancestor {ancestor.number}; the node changed branch mid-walk"
            )
        _check_links(self.chain, branch)
        new_hash: dict[int, BlockHash] = {b.header.number: b.header.hash for b in branch}
        replaced = tuple(
            ReplacedBlock(
                number=BlockNumber(n),
                old_hash=held.hash,
                new_hash=new_hash.get(n),
            )
            for n in range(ancestor.number + 1, head.number + 1)
            if (held := self.window.get(n)) is not None
        )
        reorg = Reorg(
            depth=head.number - ancestor.number,
            common_ancestor=ancestor,
            old_head=head,
            replaced=replaced,
        )
        return Advance(node_head=latest.header, blocks=tuple(branch), reorg=reorg)

    def _common_ancestor(self, start: int) -> BlockHeader:
        """Highest held header that the node still has at the same height with the same hash."""
        bottom = self.window.bottom
        assert bottom is not None
        high = start
        step = self.client.max_batch
        while high >= bottom:
            low = max(bottom, high - step + 1)
            numbers = list(range(low, high + 1))
            fetched = self.client.blocks(numbers, full=False)
            for number, block in sorted(
                zip(numbers, fetched, strict=True), key=lambda pair: -pair[0]
            ):
                held = self.window.get(number)
                if block is not None and held is not None and block.header.hash == held.hash:
                    return held
            high = low - 1
        raise ReorgTooDeep(self.chain, bottom)


def _check_links(chain: str, blocks: list[Block]) -> None:
    for below, above in itertools.pairwise(blocks):
        if (
            above.header.parent_hash != below.header.hash
            or above.header.number != below.header.number + 1
        ):
            raise ChainInconsistent(
                f"{chain}: block {above.header.number} does not link to block "
                f"{below.header.number}; the node changed branch between calls"
            )
