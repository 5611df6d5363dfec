"""Head tracker and RPC client against a scripted node (the transport seam).

Integration tests run a real anvil; these script what anvil will not do on its own: a JSON-RPC
error inside HTTP 200, a malformed answer, a node that goes backwards, a block whose parent
does not link, a reorg deeper than the window.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from chains.errors import (
    ChainInconsistent,
    ReorgTooDeep,
    RpcErrorResponse,
    RpcMalformedResponse,
)
from chains.models import BlockHeader
from chains.rpc import RpcClient
from chains.tracker import HeaderWindow, HeadTracker
from guard.types import BlockHash, BlockNumber


def h(tag: str, n: int) -> str:
    """A deterministic 32-byte hash for block ``n`` of branch ``tag``."""
    return "0x" + (tag.encode().hex() + f"{n:x}").rjust(64, "0")[-64:]


class ScriptedNode:
    """A JSON-RPC transport over an in-memory chain that tests rewrite at will."""

    endpoint = "scripted://node"

    def __init__(self, length: int, tag: str = "a") -> None:
        self.chain: list[dict[str, Any]] = []
        self.extend(length, tag)
        self.latest_override: dict[str, Any] | None = None
        self.error_for: str | None = None
        self.requests: list[str] = []
        self.keeps_side_blocks = False
        """Whether replaced blocks are still served by hash (a real node, for a while);
        anvil forgets them, and so does this node by default."""
        self.side: list[dict[str, Any]] = []

    def extend(self, count: int, tag: str = "a") -> None:
        for _ in range(count):
            n = len(self.chain)
            parent = self.chain[-1]["hash"] if self.chain else "0x" + "00" * 32
            self.chain.append(
                {
                    "number": hex(n),
                    "hash": h(tag, n),
                    "parentHash": parent,
                    "timestamp": hex(1000 + n),
                    "transactions": [],
                }
            )

    def fork(self, at: int, count: int, tag: str) -> None:
        """Replace everything above ``at`` with ``count`` blocks of branch ``tag``."""
        if self.keeps_side_blocks:
            self.side += self.chain[at + 1 :]
        del self.chain[at + 1 :]
        self.extend(count, tag)

    def _answer(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        self.requests.append(method)
        if method == self.error_for:
            return {
                "jsonrpc": "2.0",
                "id": 1,
                "error": {"code": -32000, "message": "header not found"},
            }
        if method == "eth_getBlockByNumber":
            tag = params[0]
            if tag == "latest":
                return {"jsonrpc": "2.0", "id": 1, "result": self.latest_override or self.chain[-1]}
            n = int(tag, 16)
            return {
                "jsonrpc": "2.0",
                "id": 1,
                "result": self.chain[n] if n < len(self.chain) else None,
            }
        if method == "eth_getBlockByHash":
            known = [b for b in self.chain + self.side if b is not None and b["hash"] == params[0]]
            return {"jsonrpc": "2.0", "id": 1, "result": known[0] if known else None}
        raise AssertionError(f"unexpected {method}")

    def request(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        return self._answer(method, params)

    def batch(self, calls: Sequence[tuple[str, Sequence[Any]]]) -> list[Mapping[str, Any]]:
        return [self._answer(m, p) for m, p in calls]


def header(block: dict[str, Any]) -> BlockHeader:
    return BlockHeader(
        BlockNumber(int(block["number"], 16)),
        BlockHash(block["hash"]),
        BlockHash(block["parentHash"]),
        int(block["timestamp"], 16),
    )


def tracker_at(node: ScriptedNode, window: int = 10) -> HeadTracker:
    """A tracker whose window already holds the node's last ``window`` blocks."""
    win = HeaderWindow(window, [header(b) for b in node.chain[-window:]])
    return HeadTracker("test", RpcClient(node), win, max_blocks_per_poll=50)


def test_one_new_block_costs_one_call() -> None:
    node = ScriptedNode(20)
    tracker = tracker_at(node)
    node.extend(1)
    node.requests.clear()
    advance = tracker.poll()
    assert [b.header.number for b in advance.blocks] == [20]
    assert advance.reorg is None
    assert node.requests == ["eth_getBlockByNumber"]


def test_gap_is_filled_in_order() -> None:
    node = ScriptedNode(20)
    tracker = tracker_at(node)
    node.extend(7)
    advance = tracker.poll()
    assert [b.header.number for b in advance.blocks] == list(range(20, 27))


def test_jsonrpc_error_inside_http_200_is_an_error_not_an_empty_answer() -> None:
    node = ScriptedNode(5)
    node.error_for = "eth_getBlockByNumber"
    with pytest.raises(RpcErrorResponse, match="header not found"):
        tracker_at(node, 3).poll()


def test_malformed_block_is_rejected_with_the_field_named() -> None:
    node = ScriptedNode(5)
    node.latest_override = dict(node.chain[-1], hash="0x1234")
    with pytest.raises(RpcMalformedResponse, match="hash"):
        tracker_at(node, 3).poll()


def test_head_going_back_on_the_same_chain_is_lagging_not_a_reorg() -> None:
    node = ScriptedNode(20)
    tracker = tracker_at(node)
    node.latest_override = node.chain[15]
    advance = tracker.poll()
    assert advance.lagging and advance.reorg is None and not advance.blocks


def test_competing_branch_is_a_reorg_with_its_common_ancestor() -> None:
    node = ScriptedNode(20)
    tracker = tracker_at(node)
    old_head = node.chain[-1]["hash"]
    node.fork(at=16, count=5, tag="b")  # replaces 17..19, new head 21
    advance = tracker.poll()
    assert advance.reorg is not None
    assert advance.reorg.common_ancestor.number == 16
    assert advance.reorg.depth == 3
    assert advance.reorg.old_head.hash == old_head
    assert [r.number for r in advance.reorg.replaced] == [17, 18, 19]
    assert all(r.new_hash is not None and r.new_hash != r.old_hash for r in advance.reorg.replaced)
    assert [b.header.number for b in advance.blocks] == list(range(17, 22))
    assert advance.blocks[0].header.parent_hash == advance.reorg.common_ancestor.hash


def test_shorter_competing_branch_is_a_reorg_too() -> None:
    node = ScriptedNode(20)
    tracker = tracker_at(node)
    node.fork(at=15, count=2, tag="c")  # new head 17 < old head 19, different hash
    advance = tracker.poll()
    assert advance.reorg is not None and advance.reorg.common_ancestor.number == 15
    replaced: dict[int, BlockHash | None] = {r.number: r.new_hash for r in advance.reorg.replaced}
    assert replaced[18] is None and replaced[19] is None and replaced[16] is not None


def test_reorg_replacing_the_whole_window_with_nothing_recorded_below_rebases() -> None:
    node = ScriptedNode(30)
    tracker = tracker_at(node, window=5)  # holds 25..29
    node.fork(at=10, count=25, tag="d")
    advance = tracker.poll()
    reorg = advance.reorg
    assert reorg is not None and reorg.beyond_window
    # Block 25's parentHash names the old 24, which the node no longer has there: 24 is known
    # replaced too; the old 24 is forgotten (as anvil does), so nothing more is known below.
    assert reorg.common_ancestor == header(node.chain[23])  # rebased below what is known
    assert [b.header.number for b in advance.blocks] == list(range(24, 36))
    assert advance.blocks[0].header.parent_hash == node.chain[23]["hash"]
    assert [r.number for r in reorg.replaced] == [24, 25, 26, 27, 28, 29]
    assert reorg.depth == 6  # all we can tell: a lower bound
    assert reorg.recorded_ancestor == header(node.chain[0])  # the only block known common


def test_a_node_that_still_serves_the_old_branch_gives_the_true_ancestor() -> None:
    node = ScriptedNode(30)
    node.keeps_side_blocks = True
    tracker = tracker_at(node, window=5)
    node.fork(at=10, count=25, tag="d")
    advance = tracker.poll()
    reorg = advance.reorg
    assert reorg is not None and reorg.beyond_window
    assert reorg.common_ancestor == reorg.recorded_ancestor == header(node.chain[10])
    assert reorg.depth == 19
    assert [r.number for r in reorg.replaced] == list(range(11, 30))
    assert [b.header.number for b in advance.blocks] == list(range(11, 36))


def recorded_at(points: list[tuple[int, str]]) -> Callable[[int, int], list[tuple[int, str]]]:
    """What a store would answer: recorded blocks strictly below ``below``, highest first."""

    def recorded(below: int, limit: int) -> list[tuple[int, str]]:
        return sorted([p for p in points if p[0] < below], reverse=True)[:limit]

    return recorded


def test_a_recorded_block_below_the_window_that_survived_stops_the_walk() -> None:
    node = ScriptedNode(30)
    tracker = tracker_at(node, window=5)
    tracker.recorded = recorded_at([(8, h("a", 8)), (3, h("a", 3))])
    node.fork(at=10, count=25, tag="d")
    node.chain[3] = None  # type: ignore[call-overload]  # asking for it would fail the poll
    reorg = tracker.poll().reorg
    assert reorg is not None and reorg.beyond_window
    assert [r.number for r in reorg.replaced] == [24, 25, 26, 27, 28, 29]  # 8 survived
    assert reorg.common_ancestor.number == 23
    assert reorg.recorded_ancestor == header(node.chain[8])  # known on both branches


def test_recorded_blocks_below_the_window_that_were_replaced_are_reported() -> None:
    node = ScriptedNode(30)
    tracker = tracker_at(node, window=5)
    tracker.recorded = recorded_at([(20, h("a", 20)), (15, h("a", 15)), (8, h("a", 8))])
    node.fork(at=10, count=25, tag="d")
    reorg = tracker.poll().reorg
    assert reorg is not None and reorg.beyond_window
    below = {r.number: (r.old_hash, r.new_hash) for r in reorg.replaced if r.number < 25}
    assert below == {
        24: (h("a", 24), h("d", 24)),
        20: (h("a", 20), h("d", 20)),
        15: (h("a", 15), h("d", 15)),
    }
    assert reorg.recorded_ancestor == header(node.chain[8])
    assert reorg.depth == 29 - 15 + 1  # at least down to the lowest replaced block we knew


def test_a_recorded_block_the_node_no_longer_serves_is_named_not_guessed() -> None:
    node = ScriptedNode(30)
    tracker = tracker_at(node, window=5)
    tracker.recorded = recorded_at([(20, h("a", 20))])
    node.fork(at=10, count=25, tag="d")
    node.chain[20] = None  # type: ignore[call-overload]  # a pruned node: no block 20
    with pytest.raises(ChainInconsistent, match=r"has no block 20.*a node that serves its history"):
        tracker.poll()


def test_a_node_with_another_genesis_is_not_rebased_onto() -> None:
    node = ScriptedNode(3)
    tracker = tracker_at(node, window=5)  # holds 0..2
    node.fork(at=-1, count=4, tag="g")
    with pytest.raises(ReorgTooDeep, match="no common ancestor at or above block 0"):
        tracker.poll()


def test_gap_that_does_not_link_internally_is_inconsistent() -> None:
    node = ScriptedNode(20)
    tracker = tracker_at(node)
    node.extend(5)
    node.chain[22] = dict(node.chain[22], parentHash=h("z", 99))
    with pytest.raises(ChainInconsistent, match="does not link"):
        tracker.poll()


def test_window_refuses_a_header_that_does_not_link() -> None:
    node = ScriptedNode(5)
    win = HeaderWindow(3, [header(b) for b in node.chain[:3]])
    with pytest.raises(ChainInconsistent):
        win.push(header(dict(node.chain[4], number=hex(3))))
    assert win.head is not None and win.head.number == 2


def test_window_keeps_its_head_and_bottom_through_pushes_rewinds_and_resets() -> None:
    """Head and bottom are the highest and lowest heights held, whatever came before: the
    window drops its oldest past capacity, forgets above a rewind and takes a new branch."""
    node = ScriptedNode(12)
    win = HeaderWindow(4, reversed([header(b) for b in node.chain[:3]]))
    for block in node.chain[3:9]:
        win.push(header(block))
    assert [h.number for h in win.headers()] == [5, 6, 7, 8]
    assert (win.bottom, win.head and win.head.number) == (5, 8)
    win.rewind_to(6)
    assert [h.number for h in win.headers()] == [5, 6]
    branch = dict(node.chain[7], parentHash=node.chain[6]["hash"], hash=h("b", 7))
    win.push(header(branch))
    assert win.head is not None and win.head.hash == h("b", 7)
    assert (win.bottom, len(win)) == (5, 3)
    win.rewind_to(2)
    assert win.head is None and win.bottom is None and win.headers() == []
