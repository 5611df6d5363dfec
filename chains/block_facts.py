"""What the head tracker already fetched, kept so that no receipt asks the node again.

The tracker fetches every new block (``eth_getBlockByNumber(n, true)``) and the engine fetches
``eth_getBlockReceipts`` of every block that holds a watched tx. A finality receipt needs
exactly those facts: the headers from inclusion to depth N, and the block's receipts. This
module keeps them, fed by the client's observers, so that building a receipt costs no call:

* :func:`compact_header` turns a block object into the bytes the store keeps beside its
  header row (one presence byte for the fork-added fields, then the header's RLP), only when
  those fields re-hash to the block's hash; :func:`header_from_compact` gives back the
  header object a receipt carries, exactly as the node spelled it (canonical hex). A block's
  compact header is made when first asked for (:meth:`BlockFacts.header`), not when the
  block is parsed: a catch-up parses every block but stores only the header window's, and
  re-hashing each header was a fifth of its CPU. A client that re-hashed the block to check
  it (``check_headers``) hands the result over (:meth:`BlockFacts.offer_rehashed`): a
  header is hashed once;
* :class:`BlockFacts` holds, per client, the compact headers of the last blocks parsed, the
  raw receipts of the last blocks whose receipts were fetched (and checked against the
  header: chains/block_checks.py), the tries that check built, the tx objects of recent full
  blocks, and which tx hashes the last full blocks held (a registration that knows its sender
  finds its tx there without a probe).

A block hash names its content for good, so nothing here can go stale; a reorg only makes
some entries useless, and the bounded maps forget them.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from itertools import islice
from typing import Any

from chains.block_tries import BlockTries
from chains.header_hash import rehashed
from chains.rpc import RpcClient
from chains.tx_cache import TxObjectCache
from guard import rlp
from guard.hashing import keccak256
from guard.headers import FIELD_NAMES, OPTIONAL_FIELDS, QUANTITY, REQUIRED_FIELDS

COMPACT_VERSION = 1
"""First byte of a compact header: the format of what follows."""

HEADERS_HELD = 1024
"""Compact headers kept in memory (the store keeps the window; this only bridges the moment
between the tracker's fetch and the block's commit)."""

RECEIPTS_HELD = 32
"""Blocks whose raw receipts are kept (a burst of settlements in one block shares them)."""

TX_BLOCKS_HELD = 128
"""Full blocks whose tx hashes are indexed (tx hash → block)."""


def compact_header(block: Mapping[str, Any]) -> bytes | None:
    """``version, presence mask, rlp(fields)`` of a JSON-RPC block, or None when its fields do
    not hash to its ``hash`` (a chain whose header this version cannot re-hash)."""
    checked = rehashed(block)
    if checked is None:
        return None
    return compact_of(*checked)


def compact_of(header: Mapping[str, Any], encoded: bytes) -> bytes:
    """The compact header of a header object and its RLP (:func:`chains.header_hash.rehashed`
    proved that they hash to its ``hash``)."""
    mask = sum(1 << i for i, (name, _) in enumerate(OPTIONAL_FIELDS) if name in header)
    return bytes([COMPACT_VERSION, mask]) + encoded


_KEPT = (*sorted(FIELD_NAMES), "hash")
"""The keys of a block object a compact header is made from."""


class _Unhashed:
    """A parsed block's header fields, its compact header not made yet (see the module doc)."""

    __slots__ = ("fields",)

    def __init__(self, block: Mapping[str, Any]) -> None:
        self.fields = {k: block[k] for k in _KEPT if k in block}


def _hex(kind: str, value: bytes) -> str:
    if kind == QUANTITY:
        return hex(int.from_bytes(value, "big"))
    return "0x" + value.hex()


def header_from_compact(blob: bytes) -> dict[str, str]:
    """The header object (JSON-RPC names, canonical hex, with its ``hash``) of a compact
    header; ValueError if ``blob`` is not one."""
    if len(blob) < 3 or blob[0] != COMPACT_VERSION:
        raise ValueError("not a compact header (version byte)")
    mask, encoded = blob[1], blob[2:]
    items = rlp.decode(encoded)
    names = [*REQUIRED_FIELDS, *(f for i, f in enumerate(OPTIONAL_FIELDS) if mask >> i & 1)]
    if isinstance(items, bytes) or len(items) != len(names):
        raise ValueError("compact header: its fields do not match its presence mask")
    out: dict[str, str] = {}
    for (name, kind), item in zip(names, items, strict=True):
        if not isinstance(item, bytes):
            raise ValueError(f"compact header: {name} is not a string")
        out[name] = _hex(kind, item)
    out["hash"] = "0x" + keccak256(encoded).hex()
    return out


class BlockFacts:
    """Per client: compact headers, raw block receipts and tx locations of recent blocks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._headers: OrderedDict[str, bytes | _Unhashed | None] = OrderedDict()
        self._receipts: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
        self._tx_blocks: OrderedDict[str, tuple[int, list[str]]] = OrderedDict()
        self._tx_at: dict[str, str] = {}
        self._tries: OrderedDict[str, BlockTries] = OrderedDict()
        self._watched: OrderedDict[str, dict[str, None]] = OrderedDict()
        self.tx_objects = TxObjectCache()
        """The tx objects of recent full blocks (their txs are checked against
        ``transactionsRoot`` without fetching them again)."""
        self.tries_observers: list[Callable[[BlockTries], None]] = []
        """Called with each block's checked tries as they are offered, outside the lock:
        the receipt builder cuts its watched txs' proofs then (a catch-up lets a block's
        tries go :data:`RECEIPTS_HELD` blocks later, long before the receipts thread runs)."""

    # -- fed by the client -----------------------------------------------------------------

    def offer_block(self, block: Mapping[str, Any]) -> None:
        """A block object the client parsed: keep its compact header and its tx hashes."""
        block_hash = block.get("hash")
        if not isinstance(block_hash, str):
            return
        self.tx_objects.offer(block)
        # Made outside the lock even when the header is known already (a block is offered
        # once, but for a reorg's walk or a receipt's refetch): one lock taken, not two.
        compact = _Unhashed(block)
        txs = block.get("transactions")
        hashes = (
            [str(t["hash"] if isinstance(t, Mapping) else t) for t in txs]
            if isinstance(txs, list)
            else None
        )
        with self._lock:
            if block_hash not in self._headers:
                self._headers[block_hash] = compact
                while len(self._headers) > HEADERS_HELD:
                    self._headers.popitem(last=False)
            if hashes is not None and block_hash not in self._tx_blocks:
                number = int(str(block.get("number", "0x0")), 16)
                self._tx_blocks[block_hash] = (number, hashes)
                for h in hashes:
                    self._tx_at[h] = block_hash
                while len(self._tx_blocks) > TX_BLOCKS_HELD:
                    _, (_n, old) = self._tx_blocks.popitem(last=False)
                    for h in old:
                        if self._tx_at.get(h) not in self._tx_blocks:
                            self._tx_at.pop(h, None)

    def offer_rehashed(self, header: Mapping[str, Any], encoded: bytes) -> None:
        """A header the client re-hashed to check it (``check_headers``: its RLP hashes to
        its ``hash``): its compact header, without hashing it again."""
        block_hash = str(header["hash"])
        with self._lock:
            if isinstance(self._headers.get(block_hash, _UNSET), bytes):
                return
            self._headers[block_hash] = compact_of(header, encoded)
            while len(self._headers) > HEADERS_HELD:
                self._headers.popitem(last=False)

    def offer_receipts(self, block_hash: str, receipts: list[Mapping[str, Any]]) -> None:
        """The complete ``eth_getBlockReceipts`` answer of ``block_hash``."""
        if not all(isinstance(r, Mapping) and r.get("blockHash") == block_hash for r in receipts):
            return  # another fork's answer (the node switched meanwhile): nothing to keep
        ordered = sorted(receipts, key=lambda r: int(str(r.get("transactionIndex", "0x0")), 16))
        with self._lock:
            self._receipts[block_hash] = ordered
            self._receipts.move_to_end(block_hash)
            while len(self._receipts) > RECEIPTS_HELD:
                self._receipts.popitem(last=False)

    def offer_tries(self, tries: BlockTries) -> None:
        """Both tries of a block, checked against its header (the receipt builder proves
        from them instead of building them again)."""
        with self._lock:
            self._tries[tries.block_hash] = tries
            while len(self._tries) > RECEIPTS_HELD:
                self._tries.popitem(last=False)
        for observe in self.tries_observers:
            observe(tries)

    def offer_watched(self, block_hash: str, tx_hashes: list[str]) -> None:
        """The txs of ``block_hash`` whose receipts a caller asked for (the engine's watched
        ones): the receipt builder proves them ahead, while they wait for depth N."""
        with self._lock:
            held = self._watched.get(block_hash)
            if held is None:
                held = self._watched[block_hash] = {}
                while len(self._watched) > TX_BLOCKS_HELD:
                    self._watched.popitem(last=False)
            held.update(dict.fromkeys(tx_hashes))

    # -- read ----------------------------------------------------------------------------------

    def watched(self, last: int) -> list[tuple[str, list[str]]]:
        """(block hash, the txs asked for in it) of the ``last`` newest blocks with watched
        txs, newest first."""
        with self._lock:
            newest = islice(reversed(self._watched.items()), last)
            return [(block_hash, list(txs)) for block_hash, txs in newest]

    def watched_in(self, block_hash: str) -> list[str]:
        """The txs of ``block_hash`` whose receipts were asked for (none if not held)."""
        with self._lock:
            return list(self._watched.get(block_hash, ()))

    def tries(self, block_hash: str) -> BlockTries | None:
        """The checked tries of ``block_hash``, if the engine built them."""
        with self._lock:
            return self._tries.get(block_hash)

    def header(self, block_hash: str) -> bytes | None:
        """The compact header of ``block_hash``, if the client parsed it (and it re-hashes):
        made on the first read (see the module doc)."""
        with self._lock:
            held = self._headers.get(block_hash)
        if not isinstance(held, _Unhashed):
            return held
        compact = compact_header(held.fields)
        with self._lock:
            if self._headers.get(block_hash) is held:
                self._headers[block_hash] = compact
        return compact

    def receipts(self, block_hash: str) -> list[Mapping[str, Any]] | None:
        """The raw receipts of ``block_hash`` in tx order, if fetched."""
        with self._lock:
            return self._receipts.get(block_hash)

    def tx_hashes(self, block_hash: str) -> list[str] | None:
        """The tx hashes of ``block_hash`` in order, if the client parsed the block."""
        with self._lock:
            held = self._tx_blocks.get(block_hash)
        return None if held is None else held[1]

    def located(self, tx_hash: str) -> tuple[int, str] | None:
        """(number, block hash) of a recently parsed block holding ``tx_hash``."""
        with self._lock:
            block_hash = self._tx_at.get(tx_hash)
            held = None if block_hash is None else self._tx_blocks.get(block_hash)
        return None if held is None or block_hash is None else (held[0], block_hash)


_UNSET = object()

_FACTS: weakref.WeakKeyDictionary[RpcClient, BlockFacts] = weakref.WeakKeyDictionary()
_FACTS_LOCK = threading.Lock()


def facts_of(client: RpcClient) -> BlockFacts:
    """The one :class:`BlockFacts` of ``client`` (made and subscribed on first use): the
    engine and the receipt builder of a chain share it through their shared client."""
    with _FACTS_LOCK:
        facts = _FACTS.get(client)
        if facts is None:
            facts = BlockFacts()
            client.block_observers.append(facts.offer_block)
            client.rehash_observers.append(facts.offer_rehashed)
            client.receipt_observers.append(facts.offer_receipts)
            _FACTS[client] = facts
        return facts
