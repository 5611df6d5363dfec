"""The headers of each watched block's span, kept from the tracker's fetch until its receipt.

A finality receipt for a tx in block B carries the headers B .. B + N - 1, read from the
store's header window (watcher/receipts/headers.py). A catch-up stores only the window left
at its poll's end, and the facts keep the last 1,024 headers parsed: so the receipts of a
catch-up's earlier watched blocks read their header chains from the node again, one header
at a time (120 of 2,000 blocks caught up with 100 watched txs). This keeps, from the moment
the engine checks a watched block's receipts, the header fields of the ``depth`` blocks from
B up as the client parses them (the tracker's own answers), per watched block and at most
:data:`SPANS_HELD` blocks' spans, not per block caught up.

Nothing kept is believed: :meth:`HeaderSpans.chain` gives the headers only when each
re-hashes to its hash (the fields made into a compact header and hashed, as the store's are)
and they link by parent hash from B's hash up to the decision's head (through the store's
window when the head is above the span); else None, and the caller reads the chain as
before (store, then node). A reorg leaves fields of the other branch here: they do not
link, and are replaced when the new branch's block is parsed.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from chains.block_facts import BlockFacts, compact_header, header_from_compact
from chains.block_tries import BlockTries
from chains.rpc import RpcClient
from guard.headers import FIELD_NAMES

SPANS_HELD = 1024
"""Watched blocks whose spans are kept at most (the oldest goes first): with N = 12 about
12,000 header objects of a few hundred bytes each, whatever the length of a catch-up."""

RECENT_HELD = 1024
"""Blocks parsed last kept by number (a catch-up's run of up to 500 blocks is parsed before
its watched blocks' receipts are checked: their spans start among these)."""

_KEPT = (*FIELD_NAMES, "hash")
"""The keys of a block object its header is rebuilt from (chains/block_facts.py's)."""


class HeaderSpans:
    """One chain's watched blocks' header spans, fed by its client's parsed blocks."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        """Headers kept from each watched block up (the chain's confirmations)."""
        self._lock = threading.Lock()
        self._recent: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._spans: OrderedDict[str, range] = OrderedDict()
        self._wanted: Counter[int] = Counter()
        """Per height: how many held spans cover it."""
        self._kept: dict[int, dict[str, Any]] = {}

    @classmethod
    def of(cls, client: RpcClient, facts: BlockFacts, depth: int) -> HeaderSpans:
        """Spans of ``depth`` headers fed by ``client``'s parsed blocks, each opened when the
        engine's check offers a watched block's tries to ``facts`` (chains/block_checks.py)."""
        spans = cls(depth)
        client.block_observers.append(spans.offer_block)

        def opened(tries: BlockTries) -> None:
            compact = facts.header(tries.block_hash)
            if compact is not None:
                spans.open(tries.block_hash, int(header_from_compact(compact)["number"], 16))

        facts.tries_observers.append(opened)
        return spans

    def offer_block(self, block: Mapping[str, Any]) -> None:
        """A block the client parsed: kept by number when a span covers it, and as recent."""
        try:
            number = int(str(block["number"]), 16)
        except (KeyError, ValueError):
            return
        fields = {k: block[k] for k in _KEPT if k in block}
        with self._lock:
            self._recent[number] = fields
            self._recent.move_to_end(number)
            while len(self._recent) > RECENT_HELD:
                self._recent.popitem(last=False)
            if self._wanted[number]:
                self._kept[number] = fields

    def open(self, block_hash: str, number: int) -> None:
        """Keep the span of watched block ``block_hash`` at ``number`` (those of its headers
        parsed already from the recent ones)."""
        with self._lock:
            if block_hash in self._spans:
                return
            span = self._spans[block_hash] = range(number, number + self.depth)
            for n in span:
                self._wanted[n] += 1
                if n not in self._kept and n in self._recent:
                    self._kept[n] = self._recent[n]
            while len(self._spans) > SPANS_HELD:
                self._close(self._spans.popitem(last=False)[1])

    def _close(self, span: range) -> None:
        for n in span:
            self._wanted[n] -= 1
            if self._wanted[n] <= 0:
                del self._wanted[n]
                self._kept.pop(n, None)

    def chain(
        self,
        first: int,
        count: int,
        first_hash: str,
        head: tuple[int, str],
        head_linked: Callable[[tuple[int, str], tuple[int, str]], bool],
    ) -> list[dict[str, str]] | None:
        """The ``count`` header objects from block ``first`` (hash ``first_hash``) up, each
        re-hashed and linked to the one below, the decision's ``head`` among them, or above
        them and ``head_linked(top, head)`` (the store's window holds the head, linked by
        parent hash down to the last of them, ``top``: number and hash); None when not all
        are kept and sound (the node is asked, as before)."""
        with self._lock:
            fields = [self._kept.get(n) for n in range(first, first + count)]
        headers: list[dict[str, str]] = []
        for held in fields:
            compact = None if held is None else compact_header(held)
            if compact is None:
                return None
            header = header_from_compact(compact)
            below = headers[-1]["hash"] if headers else None
            if (below is None and header["hash"] != first_hash) or (
                below is not None and header["parentHash"] != below
            ):
                return None
            headers.append(header)
        top = first + count - 1
        if head[0] > top:
            return headers if head_linked((top, headers[-1]["hash"]), head) else None
        return headers if headers[head[0] - first]["hash"] == head[1] else None
