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

A reorg can replace every block of the window (right after a cold start the window holds a
single block: the tip). Then the walk goes on below it (:mod:`chains.rebase`): the chain is
*rebased* (``Reorg.beyond_window``) with what is known recorded, and the caller looks every
watched tx up again, since the new branch below the window is never scanned.

With several endpoints, a followed node whose chain cannot be joined to the window at all
while another endpoint's chain does (a competing chain) is left as ``forked`` in favour of
that one, never rebased onto; it is checked again (one call) after each backoff.

:meth:`HeadTracker.poll` only reads; the caller commits each block's effects and then moves
the window (:meth:`HeaderWindow.rewind_to`, :meth:`HeaderWindow.push`), so the window in
memory never runs ahead of what the store holds.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from chains.errors import ChainError, ChainInconsistent
from chains.health import redact
from chains.models import Block, BlockHeader
from chains.multi import MultiRpcClient
from chains.rebase import BelowWindow, RecordedBlocks, ReplacedBlock, nothing_recorded
from chains.rpc import RpcClient
from guard.types import BlockHash, BlockNumber

__all__ = [
    "Advance",
    "HeadTracker",
    "HeaderWindow",
    "PollLimits",
    "RecordedBlocks",
    "Reorg",
    "ReplacedBlock",
]


@dataclass(frozen=True, slots=True)
class PollLimits:
    """How much one poll may ask of the node: given to each poll as an argument (a poll
    sized to a call budget), never set on the tracker or the shared client."""

    max_blocks: int = 500
    """New blocks fetched per poll at most (a catch-up advances this much a poll)."""
    max_batch: int | None = None
    """Calls per JSON-RPC batch at most; None: the client's own setting."""
    max_probes: int = 1_000_000
    """Watched txs looked up by hash per poll at most (the engine's part of the poll)."""


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
    """Each replaced height, old and new hash (below the window: the recorded blocks of
    settlements that the node no longer has)."""
    beyond_window: bool = False
    """True when no block of the header window survived: ``common_ancestor`` is the node's
    block below the lowest height known to be replaced (a rebase: where the window joins the
    node's chain again, not a block known to be on the old branch), and ``depth`` is a lower
    bound. Watched txs must be looked up again: the new branch below the window is not
    scanned."""
    known_ancestor: BlockHeader | None = None
    """After a rebase: the highest block known to be on both branches (see the module doc)."""

    @property
    def recorded_ancestor(self) -> BlockHeader:
        """The common ancestor as recorded and shown: a block known to be on both branches
        (after a rebase, :attr:`known_ancestor`; else :attr:`common_ancestor`)."""
        return self.known_ancestor or self.common_ancestor


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
    """Recent canonical headers by height, contiguous, at most ``capacity`` of them.

    Held in a dict in ascending order of height (every push is the next height, a rewind
    drops the top): the head is its last entry and the bottom its first, found at once (a
    catch-up pushes every block, and each push looked both up through every held height)."""

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
        return self._by_number[next(reversed(self._by_number))] if self._by_number else None

    @property
    def bottom(self) -> BlockNumber | None:
        """Lowest height held, None when empty."""
        return BlockNumber(next(iter(self._by_number))) if self._by_number else None

    def get(self, number: int) -> BlockHeader | None:
        """The header held at ``number``, if any."""
        return self._by_number.get(number)

    def headers(self) -> list[BlockHeader]:
        """All held headers, ascending."""
        return list(self._by_number.values())

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
            del self._by_number[next(iter(self._by_number))]

    def rewind_to(self, number: int) -> None:
        """Forget every header above ``number`` (the common ancestor of a reorg)."""
        for n in [n for n in self._by_number if n > number]:
            del self._by_number[n]


class HeadTracker:
    """Finds new canonical blocks and reorgs for one chain, reading through ``client``."""

    def __init__(
        self,
        chain: str,
        client: RpcClient,
        window: HeaderWindow,
        max_blocks_per_poll: int = 500,
        recorded: RecordedBlocks = nothing_recorded,
    ) -> None:
        self.chain = chain
        self.client = client
        self.window = window
        self.default_limits = PollLimits(max_blocks=max_blocks_per_poll)
        """The limits of a poll that is given none."""
        self.recorded = recorded
        """The blocks the watcher recorded below the window (see the module doc)."""

    def poll(self, limits: PollLimits | None = None) -> Advance:
        """Ask the node once for ``latest`` and work out what changed, fetching within
        ``limits`` (default: :attr:`default_limits`). Does not move the window."""
        lim = limits or self.default_limits
        self._recheck_forked()
        advance = self._poll(lim)
        if advance.reorg is not None and advance.reorg.beyond_window and self._join_elsewhere(lim):
            advance = self._poll(lim)  # read again through the endpoint whose chain joins ours
        return advance

    def _poll(self, lim: PollLimits) -> Advance:
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
            gap = self._fetch_range(head.number + 1, node_head.number, latest, lim)
            if gap[0].header.parent_hash == head.hash:
                _check_links(self.chain, gap)
                return Advance(node_head=node_head, blocks=tuple(gap))
        return self._reorg(head, latest, lim)

    def _fetch_range(
        self, first: int, node_head: int, latest: Block, lim: PollLimits
    ) -> list[Block]:
        """Blocks ``first``.. up to ``lim.max_blocks`` of them, reusing ``latest``."""
        last = min(node_head, first + lim.max_blocks - 1)
        numbers = list(range(first, last + 1))
        if last == node_head:
            numbers.pop()
        fetched = self.client.blocks(numbers, True, lim.max_batch) if numbers else []
        blocks: list[Block] = []
        for number, block in zip(numbers, fetched, strict=True):
            if block is None:
                raise ChainInconsistent(f"{self.chain}: node lost block {number} below its head")
            blocks.append(block)
        if last == node_head:
            blocks.append(latest)
        return blocks

    def _reorg(self, head: BlockHeader, latest: Block, lim: PollLimits) -> Advance:
        start = min(head.number, latest.header.number)
        ancestor = self._common_ancestor(self.client, start, lim.max_batch)
        below: list[ReplacedBlock] = []
        known: BlockHeader | None = None
        if ancestor is None:
            bottom = self.window.get(self._bottom())
            assert bottom is not None
            walk = BelowWindow(self.chain, self.client, bottom, self.recorded, lim.max_batch)
            ancestor, below, known = walk.rebase(latest.header)
        branch = self._fetch_range(ancestor.number + 1, latest.header.number, latest, lim)
        if branch and branch[0].header.parent_hash != ancestor.hash:
            raise ChainInconsistent(
                f"{self.chain}: block {branch[0].header.number} does not link to the common "
                f"ancestor {ancestor.number}; the node changed branch mid-walk"
            )
        _check_links(self.chain, branch)
        new_hash: dict[int, BlockHash] = {b.header.number: b.header.hash for b in branch}
        held_replaced = [
            ReplacedBlock(number=BlockNumber(n), old_hash=held.hash, new_hash=new_hash.get(n))
            for n in range(ancestor.number + 1, head.number + 1)
            if (held := self.window.get(n)) is not None
        ]
        replaced = tuple(sorted([*below, *held_replaced], key=lambda r: r.number))
        lowest = min([ancestor.number + 1, *(b.number for b in below)])
        reorg = Reorg(
            depth=head.number - lowest + 1,
            common_ancestor=ancestor,
            old_head=head,
            replaced=replaced,
            beyond_window=bool(below) or ancestor.number < self._bottom(),
            known_ancestor=known,
        )
        return Advance(node_head=latest.header, blocks=tuple(branch), reorg=reorg)

    def _bottom(self) -> int:
        bottom = self.window.bottom
        assert bottom is not None
        return bottom

    def _common_ancestor(
        self, client: RpcClient, start: int, max_batch: int | None
    ) -> BlockHeader | None:
        """Highest held header that ``client``'s node still has at the same height with the
        same hash (walking back ``max_batch`` heights a call, default the client's own);
        None when no held header survives."""
        bottom = self._bottom()
        high = start
        step = client.max_batch if max_batch is None else max(1, min(max_batch, client.max_batch))
        while high >= bottom:
            low = max(bottom, high - step + 1)
            numbers = list(range(low, high + 1))
            fetched = client.blocks(numbers, full=False)
            for number, block in sorted(
                zip(numbers, fetched, strict=True), key=lambda pair: -pair[0]
            ):
                held = self.window.get(number)
                if block is not None and held is not None and block.header.hash == held.hash:
                    return held
            high = low - 1
        return None

    # -- several endpoints: leave one whose chain does not join ours ----------------------

    def _join_elsewhere(self, lim: PollLimits) -> bool:
        """After a poll found no held header on the followed node: follow another endpoint
        whose chain joins the window, if one does, leaving the followed one as forked."""
        client = self.client
        if not isinstance(client, MultiRpcClient) or self.window.head is None:
            return False
        followed = client.transport.active
        for i, member in enumerate(client.members):
            health = client.transport.members[i].health
            if i == followed or not health.usable or health.forked is not None:
                continue
            try:
                joined = self._common_ancestor(member, self.window.head.number, lim.max_batch)
            except ChainError:
                continue
            if joined is not None:
                client.transport.leave_forked(
                    followed,
                    i,
                    f"its chain does not join ours (no common block at or above "
                    f"{self._bottom()}) while {redact(member.endpoint)} joins at "
                    f"{joined.number}",
                )
                return True
        return False

    def _recheck_forked(self) -> None:
        """A forked endpoint whose backoff passed: back once it has our head (one call)."""
        client = self.client
        head = self.window.head
        if not isinstance(client, MultiRpcClient) or head is None:
            return
        for i, member in enumerate(client.members):
            health = client.transport.members[i].health
            if health.forked is None or not health.stall_due:
                continue
            try:
                [block] = member.blocks([head.number], full=False)
            except ChainError:
                block = None
            if block is not None and block.header.hash == head.hash:
                health.unfork()
            else:
                health.fork(health.forked)


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
