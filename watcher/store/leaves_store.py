"""The leaves of a block's two tries, kept once a receipt was built from them.

After a restart nothing of a block is in memory, and asking the node again for a busy
block's tx objects and receipts is the slow part of a receipt (anvil: ~250 ms for
``eth_getBlockByHash(hash, true)`` of a 500-tx block, ~130 ms for its
``eth_getBlockReceipts``). The first receipt built for a block stores here, per (chain,
block hash), its tx hashes and the exact leaf bytes of both tries, zlib-compressed (a 500-tx
block: tens of KB). Any later receipt of that block (another settlement, another depth, a
restart) rebuilds the tries from them; the roots are checked against the header again, so a
stored row can make a receipt impossible, never wrong. Rows below the header window go.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import rlp as pyrlp
from sqlalchemy import delete, insert, select

from watcher.store import schema as s
from watcher.store.db import Db


@dataclass(frozen=True)
class BlockLeaves:
    """A block's tx hashes (0x hex) and both tries' leaves, in tx order."""

    tx_hashes: list[str]
    tx_leaves: list[bytes]
    receipt_leaves: list[bytes]


def pack(leaves: BlockLeaves) -> bytes:
    """zlib(rlp([hashes, tx leaves, receipt leaves])) (pyrlp: a fast encoder of plain
    bytes; what is read back is checked against the header's roots)."""
    hashes = [bytes.fromhex(h[2:]) for h in leaves.tx_hashes]
    return zlib.compress(pyrlp.encode([hashes, leaves.tx_leaves, leaves.receipt_leaves]), 1)


def unpack(blob: bytes) -> BlockLeaves | None:
    """The leaves of a packed row; None if it is not one."""
    try:
        hashes, txs, receipts = pyrlp.decode(zlib.decompress(blob))
    except (zlib.error, pyrlp.exceptions.DecodingError, ValueError, TypeError):
        return None
    if not len(hashes) == len(txs) == len(receipts):
        return None
    return BlockLeaves(["0x" + bytes(h).hex() for h in hashes], list(txs), list(receipts))


class _Dbs(Protocol):
    @property
    def writer(self) -> Db: ...

    @property
    def reader(self) -> Db: ...


class LeavesStore:
    """Reads and writes ``block_leaves`` rows."""

    def __init__(self, writer: Db, reader: Db) -> None:
        self._writer = writer
        self._reader = reader

    def get(self, chain: str, block_hash: str) -> BlockLeaves | None:
        """The stored leaves of ``block_hash``, if a receipt was built from them."""
        t = s.block_leaves
        with self._reader.connect() as conn:
            blob = conn.execute(
                select(t.c.leaves).where(t.c.chain == chain, t.c.block_hash == block_hash)
            ).scalar()
        return None if blob is None else unpack(bytes(blob))

    def put(self, chain: str, block_hash: str, number: int, leaves: BlockLeaves, keep: int) -> None:
        """Store ``leaves`` (once per block) and drop rows more than ``keep`` blocks below."""
        t = s.block_leaves
        blob = pack(leaves)
        with self._writer.begin() as conn:
            conn.execute(delete(t).where(t.c.chain == chain, t.c.number <= number - keep))
            conn.execute(delete(t).where(t.c.chain == chain, t.c.block_hash == block_hash))
            conn.execute(
                insert(t).values(chain=chain, block_hash=block_hash, number=number, leaves=blob)
            )


def leaves_store(store: _Dbs) -> LeavesStore:
    """The block-leaves part of ``store`` (sharing its connections)."""
    return LeavesStore(store.writer, store.reader)


__all__: Sequence[str] = ("BlockLeaves", "LeavesStore", "leaves_store", "pack", "unpack")
