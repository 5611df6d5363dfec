"""The chains' stored positions and header windows (the ``chains`` and ``headers`` tables)."""

from __future__ import annotations

from sqlalchemy import insert, select

from watcher.store import schema as s
from watcher.store.db import Db
from watcher.store.errors import StoreMismatch
from watcher.store.records import ChainRecord, from_row


class ChainQueries:
    """Reads and the one registration write of chains; part of :class:`~watcher.store.store.Store`."""

    _writer: Db
    _reader: Db

    # -- chains --------------------------------------------------------------------------

    def ensure_chain(self, name: str, chain_id: int, now: int) -> ChainRecord:
        """Create the chain's row, or check that the stored one has the same chain id."""
        with self._writer.begin() as conn:
            row = conn.execute(select(s.chains).where(s.chains.c.name == name)).mappings().first()
            if row is None:
                conn.execute(insert(s.chains).values(name=name, chain_id=chain_id, updated_at=now))
                row = conn.execute(select(s.chains).where(s.chains.c.name == name)).mappings().one()
            elif row["chain_id"] != chain_id:
                raise StoreMismatch(
                    f"chain {name!r} is stored with chain id {row['chain_id']}, but the config "
                    f"says {chain_id}; use another name or another store"
                )
            return from_row(ChainRecord, row)

    def chain(self, name: str) -> ChainRecord | None:
        """Stored position of ``name``."""
        with self._reader.connect() as conn:
            row = conn.execute(select(s.chains).where(s.chains.c.name == name)).mappings().first()
        return None if row is None else from_row(ChainRecord, row)

    def chains(self) -> dict[str, ChainRecord]:
        """Stored position of every chain, by name: the head each chain's owner recorded in
        its last block transaction. Views read this, not an instance's own tracker, so a
        standby answers with the same head and depth as the owner."""
        with self._reader.connect() as conn:
            rows = conn.execute(select(s.chains)).mappings().all()
        return {row["name"]: from_row(ChainRecord, row) for row in rows}

    def headers(self, chain: str) -> list[tuple[int, str, str, int]]:
        """The stored header window: (number, hash, parent hash, timestamp), ascending."""
        h = s.headers
        with self._reader.connect() as conn:
            rows = conn.execute(
                select(h.c.number, h.c.hash, h.c.parent_hash, h.c.timestamp)
                .where(h.c.chain == chain)
                .order_by(h.c.number)
            ).all()
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def compact_headers(
        self, chain: str, first: int, last: int
    ) -> list[tuple[int, str, str, bytes | None]]:
        """Stored headers ``first..last`` of ``chain``: (number, hash, parent hash, compact
        fields or None), ascending; heights outside the window are simply absent."""
        h = s.headers
        with self._reader.connect() as conn:
            rows = conn.execute(
                select(h.c.number, h.c.hash, h.c.parent_hash, h.c.compact)
                .where(h.c.chain == chain, h.c.number >= first, h.c.number <= last)
                .order_by(h.c.number)
            ).all()
        return [(r[0], r[1], r[2], None if r[3] is None else bytes(r[3])) for r in rows]

    def recorded_blocks(self, chain: str, below: int, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` distinct ``(number, hash)`` of blocks below ``below`` that a
        settlement of ``chain`` is anchored in (inclusion or replacing tx), highest first:
        what the head tracker checks when a reorg replaced its whole header window."""
        t = s.settlements
        found: set[tuple[int, str]] = set()
        with self._reader.connect() as conn:
            for number, block_hash in (
                (t.c.block_number, t.c.block_hash),
                (t.c.replaced_block_number, t.c.replaced_block_hash),
            ):
                rows = conn.execute(
                    select(number, block_hash)
                    .where(t.c.chain == chain, number < below, block_hash.is_not(None))
                    .group_by(number, block_hash)
                    .order_by(number.desc())
                    .limit(limit)
                ).all()
                found.update((int(r[0]), str(r[1])) for r in rows)
        return sorted(found, reverse=True)[:limit]
