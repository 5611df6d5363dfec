"""The chain's tags (``finalized``, ``safe``) as one poll reads them.

A tag is fetched (one call) only when the chain's finality rule uses it and something is
watched; otherwise the last known value stands. With a quorum gate our node's
``finalized`` counts only as far as enough endpoints' tags reach.

A tx registered after its block was processed is decided when a look-up finds it, between
blocks. If nothing was watched when the chain's last blocks came, the tags were not read
then: the look-up reads them first (:func:`tags_stale`), or the verdict would wait for the
next block (for ever on a quiet chain) although the tag already covers it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from chains.finality_modes import NEEDS_FINALIZED, NEEDS_SAFE
from chains.quorum import FinalityGate
from chains.rpc import RpcClient
from guard.types import BlockNumber


@dataclass(frozen=True)
class ChainTags:
    """The chain's tags as one poll read them (:func:`watcher.engine.tags.fetch_tags`)."""

    finalized: int | None = None
    """The ``finalized`` height this poll's decisions use (with a quorum: the trusted one;
    None while the endpoints do not agree on one)."""
    known_finalized: int | None = None
    """The ``finalized`` height memory keeps (the last one known when none was fetched)."""
    safe: int | None = None
    """The ``safe`` height (fetched only under the ``safe`` rule)."""
    untrusted: int | None = None
    """Our node's ``finalized`` height when the quorum gate did not trust it that far."""
    read_at: int | None = None
    """The node's head height when the rule's tag was last read (None: not read since the
    engine started): tags read at an older head may lag the chain."""

    def covered(self, finalized: int | None) -> int | None:
        """The highest tag height that can make a settlement final (``finalized``, or the
        ``safe`` tag under the ``safe`` rule): what the store's due and anchor queries and
        the gate are asked with."""
        if self.safe is None:
            return finalized
        return self.safe if finalized is None else max(finalized, self.safe)


def fetch_tags(
    client: RpcClient,
    gate: FinalityGate,
    mode: str,
    watched: bool,
    head_number: int,
    last: ChainTags,
) -> ChainTags:
    """The tags for a poll that brought new blocks (``last``: those at the last committed
    block). Under the ``safe`` rule the ``safe`` tag is fetched instead of ``finalized``
    (chains.finality_modes)."""
    if mode in NEEDS_SAFE and watched:
        tagged = client.header("safe")
        safe = BlockNumber(tagged.number) if tagged is not None else last.safe
        return ChainTags(
            last.known_finalized, last.known_finalized, safe, last.untrusted, head_number
        )
    if mode not in NEEDS_FINALIZED or not watched:
        return replace(last, finalized=last.known_finalized)
    header = client.header("finalized")
    own: int | None = header.number if header is not None else None
    untrusted = last.untrusted
    if not gate.trivial:
        # A quorum gate: our node's tag counts only as far as k endpoints' tags reach
        # (the k-th highest); until enough have answered, nothing is finalized for us.
        bound = gate.finalized_bound(head_number, own)
        untrusted = own if own != bound else None
        if bound is None:
            return ChainTags(None, last.known_finalized, last.safe, untrusted, head_number)
        own = bound
    known = BlockNumber(own) if own is not None else last.known_finalized
    return ChainTags(known, known, last.safe, untrusted, head_number)


def tags_stale(tags: ChainTags, mode: str, head_number: int) -> bool:
    """Whether the rule ``mode`` uses a tag last read below ``head_number`` (nothing was
    watched when the chain got there), or not read since the engine started."""
    uses_tag = mode in NEEDS_SAFE or mode in NEEDS_FINALIZED
    return uses_tag and (tags.read_at is None or tags.read_at < head_number)
