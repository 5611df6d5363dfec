"""Below the header window: what a reorg that replaced every held block is known to have
replaced, and where the chain joins again.

Right after a cold start the header window holds a single block: the tip, the block most
likely to be replaced. When a reorg replaces every held block, the head tracker
(:mod:`chains.tracker`) asks :class:`BelowWindow` to walk on below the window over the only
facts known there: the window bottom's ``parentHash`` (the hash of the block below it),
followed down through the old blocks the node still serves by hash (a real node keeps side
blocks a while; anvil forgets them), then the blocks the watcher's settlements were included
in (``recorded``). Each height whose known hash the node no longer has there is a replaced
block; the first whose known hash the node still has is a true common ancestor.

The chain is then rebased on the node's block just below the lowest height known to be
replaced. What is recorded is only what is known: the depth counts the blocks known to be
replaced (a lower bound), and the ancestor recorded is a block known to be on both branches:
the one the walk found, else the genesis block; never the rebase block, which may itself be
replaced. Nothing is fetched for this at start-up, only when such a reorg happens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chains.errors import ChainInconsistent, ReorgTooDeep
from chains.models import BlockHeader
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


RecordedBlocks = Callable[[int, int], list[tuple[int, str]]]
"""``(below, limit)`` → up to ``limit`` ``(number, hash)`` of blocks the watcher recorded
settlements in, strictly below ``below``, highest first."""


def nothing_recorded(below: int, limit: int) -> list[tuple[int, str]]:
    """No recorded blocks (a tracker without a store)."""
    return []


class BelowWindow:
    """One walk below the window of ``chain`` (see the module doc), reading through
    ``client``, from the window's ``bottom`` header."""

    def __init__(
        self,
        chain: str,
        client: RpcClient,
        bottom: BlockHeader,
        recorded: RecordedBlocks,
        max_batch: int | None = None,
    ) -> None:
        self.chain = chain
        self.steps = client.max_batch if max_batch is None else max(1, max_batch)
        """Heights walked per step at most (a poll's limit, default the client's own)."""
        self.client = client
        self.bottom = bottom
        self.recorded = recorded

    def rebase(self, latest: BlockHeader) -> tuple[BlockHeader, list[ReplacedBlock], BlockHeader]:
        """No held header survived: walk on below the window (see the module doc). Returns
        the node's block to rebase on (just below the lowest height known to be replaced, or
        its head when its chain is shorter), the blocks below the window known to be
        replaced, and the highest block known to be on both branches."""
        bottom = self.bottom.number
        if bottom == 0:
            raise ReorgTooDeep(self.chain, 0)  # another genesis: another chain, not a reorg
        below, joined = self._walk_parents(latest)
        if joined is not None:
            return joined, below, joined
        lowest = below[-1].number if below else bottom
        recorded, matched = self._walk_recorded(lowest, latest)
        rebase = self._node_header(min(lowest - 1, latest.number), latest)
        return rebase, below + recorded, matched or self._node_header(0, latest)

    def _walk_parents(self, latest: BlockHeader) -> tuple[list[ReplacedBlock], BlockHeader | None]:
        """Down from the window bottom's ``parentHash``: each height where the node's block
        is not the one the old branch had, then the old block's own parent, while the node
        serves old blocks by hash (at most ``max_batch`` steps). Returns the heights known
        to be replaced, highest first, and the node's block where the old hash matched
        (a true common ancestor), if reached."""
        bottom = self.bottom
        old_hash, number = bottom.parent_hash, bottom.number - 1
        below: list[ReplacedBlock] = []
        for _ in range(self.steps):
            if number < 0:
                break
            new_hash: BlockHash | None = None
            if number <= latest.number:
                node = self._node_header(number, latest)
                if node.hash == old_hash:
                    return below, node
                new_hash = node.hash
            below.append(ReplacedBlock(BlockNumber(number), old_hash, new_hash))
            raw = self.client.call("eth_getBlockByHash", [old_hash, False])
            if raw is None:
                break  # the node forgot the old branch: nothing more is known below
            old = self.client.parse_block(raw, "eth_getBlockByHash").header
            if old.number != number:
                raise ChainInconsistent(
                    f"{self.chain}: block {old_hash} is at height {old.number}, not {number}"
                )
            old_hash, number = old.parent_hash, number - 1
        return below, None

    def _walk_recorded(
        self, under: int, latest: BlockHeader
    ) -> tuple[list[ReplacedBlock], BlockHeader | None]:
        """Down the recorded blocks below ``under``: those the node no longer has (replaced)
        until the first one it still has (everything below it is intact: a block known to
        be on both branches, returned too)."""
        below: list[ReplacedBlock] = []
        while True:
            points = self.recorded(under, self.steps)
            if not points:
                return below, None
            asked = [(n, h) for n, h in points if n <= latest.number]
            fetched = self.client.blocks([n for n, _ in asked], False, self.steps) if asked else []
            found = {n: b for (n, _), b in zip(asked, fetched, strict=True)}
            for number, old_hash in points:
                if number > latest.number:
                    below.append(ReplacedBlock(BlockNumber(number), BlockHash(old_hash), None))
                    continue
                block = found[number]
                if block is None:
                    raise ChainInconsistent(
                        f"{self.chain}: a reorg replaced every block of the header window "
                        f"(bottom {self.bottom.number}) and the node has no block {number}, where "
                        "a settlement was recorded: cannot tell whether the reorg reversed "
                        "it. Point the chain at a node that serves its history (a full node)"
                    )
                if block.header.hash == old_hash:
                    return below, block.header
                below.append(
                    ReplacedBlock(BlockNumber(number), BlockHash(old_hash), block.header.hash)
                )
            under = points[-1][0]

    def _node_header(self, number: int, latest: BlockHeader) -> BlockHeader:
        """The node's block at ``number`` (``latest`` itself at its height)."""
        if number == latest.number:
            return latest
        [block] = self.client.blocks([number], full=False)
        if block is None:
            raise ChainInconsistent(f"{self.chain}: node lost block {number} below its head")
        return block.header
