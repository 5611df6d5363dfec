"""A catch-up asks the node for the next poll's blocks while the engine applies this poll's
(chains/prefetch.py): the next poll hands on those blocks without asking again, and a
reorg while they were held is reported as a reorg, never applied over."""

from __future__ import annotations

import pytest

from chains.models import Block
from chains.rpc import RpcClient, Web3Transport
from chains.tracker import Advance, HeaderWindow, HeadTracker
from tests.support.anvil import Anvil

pytestmark = pytest.mark.anvil

PER_POLL = 10


def tracker_at_head(anvil: Anvil, prefetch: bool) -> HeadTracker:
    """A tracker (``PER_POLL`` blocks a poll) whose window holds the node's head."""
    client = RpcClient(Web3Transport(anvil.url))
    tracker = HeadTracker("test", client, HeaderWindow(64), PER_POLL, prefetch=prefetch)
    first = tracker.poll()
    tracker.window.push(first.blocks[-1].header)
    return tracker


def applied(tracker: HeadTracker) -> Advance:
    """One poll, its blocks pushed on the window as the engine does after its commits."""
    advance = tracker.poll()
    if advance.reorg is not None:
        tracker.window.rewind_to(advance.reorg.common_ancestor.number)
    for block in advance.blocks:
        tracker.window.push(block.header)
    return advance


def hashes(blocks: tuple[Block, ...]) -> list[str]:
    return [b.header.hash for b in blocks]


def test_the_next_poll_hands_on_the_blocks_asked_ahead_without_asking_again(
    anvil: Anvil,
) -> None:
    ahead, plain = tracker_at_head(anvil, True), tracker_at_head(anvil, False)
    anvil.mine(2 * PER_POLL + 5)
    for tracker in (ahead, plain):
        assert applied(tracker).behind > 0
    asked = ahead.client.calls["eth_getBlockByNumber"]
    asked_plain = plain.client.calls["eth_getBlockByNumber"]
    second, second_plain = applied(ahead), applied(plain)
    assert hashes(second.blocks) == hashes(second_plain.blocks)
    assert ahead.ahead is not None
    ahead.ahead.take(second.blocks[-1].header.number + 1)  # the last 5, asked meanwhile
    # ``latest`` and the range's top asked again: 2 calls, not 1 + PER_POLL.
    assert plain.client.calls["eth_getBlockByNumber"] - asked_plain == 1 + PER_POLL
    assert ahead.client.calls["eth_getBlockByNumber"] - asked == 2 + 5
    third = applied(ahead)
    assert third.behind == 0 and third.blocks[-1].header.number == anvil.head()


def test_a_reorg_of_the_blocks_held_ahead_is_reported_not_applied_over(anvil: Anvil) -> None:
    tracker = tracker_at_head(anvil, True)
    anvil.mine(2 * PER_POLL + 5)
    first = applied(tracker)
    assert first.behind > 0 and tracker.ahead is not None
    tracker.ahead.wait()  # the next PER_POLL blocks, asked meanwhile, are held
    # Replace blocks below the window's head and every block held ahead.
    anvil.reorg(PER_POLL + 8)
    second = applied(tracker)
    assert second.reorg is not None
    assert second.reorg.common_ancestor.number < first.blocks[-1].header.number
    node = RpcClient(Web3Transport(anvil.url))
    numbers = [b.header.number for b in second.blocks]
    assert hashes(second.blocks) == [b.header.hash for b in node.blocks(numbers) if b]
