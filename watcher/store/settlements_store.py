"""Registered settlements as stored (the ``settlements`` table): registration and reads.

The engine's writes to a settlement happen inside a block's transaction
(:class:`~watcher.store.block_txn.BlockTxn`); everything here is one statement or one
short transaction of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import bindparam, func, insert, or_, select

from chains.quorum import Anchor
from guard.payment import ADDRESS_KINDS
from watcher.store import poll_queries as pq
from watcher.store import schema as s
from watcher.store.conditions import finality_reasons
from watcher.store.db import Db
from watcher.store.errors import SettlementNotFound, StoreConflict, StoreError
from watcher.store.records import NewSettlement, SettlementRecord, WatchEntry, from_row
from watcher.store.row_insert import insert_rows

_BY_ID = select(s.settlements).where(s.settlements.c.settlement_id == bindparam("settlement_id"))
"""One settlement by id, built once: SQLAlchemy reuses its compiled form by cache key, but
building and keying a fresh ``select`` costs more than SQLite's answer."""
_OWNED = _BY_ID.where(s.settlements.c.owner == bindparam("owner"))
_RECORDED_HEAD = (
    select(s.chains.c.head_number)
    .where(s.chains.c.name == s.settlements.c.chain)
    .scalar_subquery()
    .label("recorded_head")
)
_OWNED_AT_HEAD = _OWNED.add_columns(_RECORDED_HEAD)


class SettlementQueries:
    """Registration and reads of settlements; part of :class:`~watcher.store.store.Store`."""

    _writer: Db
    _reader: Db

    # -- settlements ---------------------------------------------------------------------

    def register(self, new: NewSettlement) -> tuple[SettlementRecord, bool]:
        """Insert a settlement; if its owner already registered (chain, tx hash), return
        the stored one and False (another owner's settlement of the tx is not touched).
        (``POST /v1/settlements`` registers through ``Listing.register_one``, which answers
        the record from the values inserted with its chain's head.)"""
        try:
            with self._writer.begin() as conn:
                insert_rows(conn, [_settlement_values(new)])
        except StoreConflict:
            return self.settlement_by_tx(new.chain, new.tx_hash, owner=new.owner), False
        return self.settlement(new.settlement_id), True

    def register_many(self, news: Sequence[NewSettlement]) -> None:
        """Insert many new settlements in one transaction (a bulk import).

        All or nothing: one already registered (chain, tx hash, owner) rejects the whole
        batch with :class:`StoreError` naming the conflict.
        """
        try:
            with self._writer.begin() as conn:
                conn.execute(insert(s.settlements), [_settlement_values(n) for n in news])
        except StoreConflict as exc:
            raise StoreError(f"bulk registration rejected, nothing stored: {exc.detail}") from exc

    def settlement(self, settlement_id: str, *, owner: str | None = None) -> SettlementRecord:
        """One settlement by id; raises :class:`SettlementNotFound`, also when ``owner`` is
        given and the settlement is another's (an API caller cannot tell it exists)."""
        query, params = (_BY_ID, {}) if owner is None else (_OWNED, {"owner": owner})
        with self._reader.connect() as conn:
            row = conn.execute(query, {"settlement_id": settlement_id, **params}).mappings().first()
        if row is None:
            raise SettlementNotFound(settlement_id)
        return from_row(SettlementRecord, row)

    async def settlement_at_head(
        self, settlement_id: str, owner: str
    ) -> tuple[SettlementRecord, int | None]:
        """``owner``'s settlement and its chain's recorded head, read in one statement: one
        snapshot, so the depth a view shows is never ahead of (or behind) the stored row.
        The store's one raw read (watcher/store/fast_read.py), awaited on the API's event
        loop, for ``GET /v1/settlements/{id}`` alone. Raises :class:`SettlementNotFound` as
        :meth:`settlement` does."""
        params = {"settlement_id": settlement_id, "owner": owner}
        rows = await self._reader.fast_rows(_OWNED_AT_HEAD, params)
        if not rows:
            raise SettlementNotFound(settlement_id)
        return from_row(SettlementRecord, rows[0]), rows[0]["recorded_head"]

    def settlement_by_tx(
        self, chain: str, tx_hash: str, *, owner: str | None = None
    ) -> SettlementRecord:
        """The settlement ``owner`` registered for chain and tx hash (``owner`` None: the
        first registered by anyone); raises :class:`SettlementNotFound`."""
        t = s.settlements
        query = select(t).where(t.c.chain == chain, t.c.tx_hash == tx_hash)
        if owner is not None:
            query = query.where(t.c.owner == owner)
        with self._reader.connect() as conn:
            row = conn.execute(query.order_by(t.c.seq).limit(1)).mappings().first()
        if row is None:
            raise SettlementNotFound(f"{chain}/{tx_hash}")
        return from_row(SettlementRecord, row)

    def settlements_of_tx(self, chain: str, tx_hash: str) -> list[SettlementRecord]:
        """Every owner's settlement of chain and tx hash, in registration order (what one
        observation of the tx, a webhook, concerns)."""
        t = s.settlements
        query = select(t).where(t.c.chain == chain, t.c.tx_hash == tx_hash).order_by(t.c.seq)
        with self._reader.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [from_row(SettlementRecord, r) for r in rows]

    def proven_senders(self, chain: str, tx_hashes: Sequence[str]) -> dict[str, SettlementRecord]:
        """Per tx hash, a settlement of it (any owner) holding its signed bytes, so its sender
        and nonce are proven (recovered from the signature, not a caller's word): what another
        caller's new settlement of the same tx can take instead of a lookup."""
        t = s.settlements
        hashes = sorted(set(tx_hashes))
        found: dict[str, SettlementRecord] = {}
        with self._reader.connect() as conn:
            for start in range(0, len(hashes), 500):
                rows = conn.execute(
                    select(t)
                    .where(
                        t.c.chain == chain,
                        t.c.tx_hash.in_(hashes[start : start + 500]),
                        t.c.sender.is_not(None),
                        t.c.nonce.is_not(None),
                        t.c.raw_tx.is_not(None),
                    )
                    .order_by(t.c.seq)
                ).mappings()
                for row in rows:
                    found.setdefault(row["tx_hash"], from_row(SettlementRecord, row))
        return found

    def owned(self, settlement_ids: Iterable[str], owner: str) -> set[str]:
        """Those of ``settlement_ids`` that belong to ``owner`` (what a caller may see of a
        chain-wide event's ``touched`` list)."""
        return owned_ids(self._reader, settlement_ids, owner)

    def watch_entries(self, chain: str, after_seq: int = 0) -> list[WatchEntry]:
        """Watched settlements of ``chain`` inserted after ``after_seq``, in order."""
        params = {"q_chain": chain, "q_seq": after_seq}
        with self._reader.connect() as conn:
            rows = conn.execute(pq.watch_entries(), params).mappings().all()
        return [from_row(WatchEntry, r) for r in rows]

    def due_probes(self, chain: str, now: int, limit: int) -> list[SettlementRecord]:
        """Watched, not included, sender unknown (or given at registration and never
        probed: found in the tracker's blocks without a call), probe time reached: oldest
        first."""
        params = {"q_chain": chain, "q_now": now, "q_limit": limit}
        with self._reader.connect() as conn:
            rows = conn.execute(pq.due_probes(), params).mappings().all()
        return [from_row(SettlementRecord, r) for r in rows]

    def verdict_counts(self) -> dict[tuple[str, str], int]:
        """Number of settlements by (chain, verdict)."""
        t = s.settlements
        with self._reader.connect() as conn:
            rows = conn.execute(
                select(t.c.chain, t.c.verdict, func.count()).group_by(t.c.chain, t.c.verdict)
            ).all()
        return {(r[0], r[1]): r[2] for r in rows}

    def finality_anchors(self, chain: str, head: int, finalized: int | None) -> list[Anchor]:
        """Watched settlements of ``chain`` that ``head`` (or ``finalized``) could make
        terminal: what the finality gate is asked about before a block's transaction."""
        t = s.settlements
        reasons = finality_reasons(head, finalized)
        with self._reader.connect() as conn:
            rows = conn.execute(
                select(
                    t.c.settlement_id,
                    t.c.block_number,
                    t.c.block_hash,
                    t.c.replaced_block_number,
                    t.c.replaced_block_hash,
                    t.c.confirm_height,
                ).where(
                    t.c.chain == chain,
                    t.c.watching.is_(True),
                    or_(*reasons),
                    # A tx's anchor: a deposit (since 0022 with a depth height) has none.
                    or_(t.c.block_number.is_not(None), t.c.replaced_block_number.is_not(None)),
                )
            ).all()
        return [
            Anchor(
                settlement_id=r[0],
                block_number=r[3] if r[3] is not None else r[1],
                block_hash=r[4] if r[4] is not None else r[2],
                confirm_height=r[5],
            )
            for r in rows
            if (r[1] is not None or r[3] is not None)
        ]

    def anchored_above(
        self, chain: str, number: int
    ) -> list[tuple[str, str, str | None, int | None]]:
        """``(tx hash, settlement id, sender, nonce)`` of every settlement of ``chain`` whose
        inclusion or replacing tx sits above ``number`` (any verdict): the ones a reorg there
        touches (sender and nonce are None when the tx was never seen)."""
        t = s.settlements
        with self._reader.connect() as conn:
            rows = conn.execute(
                select(t.c.tx_hash, t.c.settlement_id, t.c.sender, t.c.nonce).where(
                    t.c.chain == chain,
                    or_(t.c.block_number > number, t.c.replaced_block_number > number),
                )
            ).all()
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def unanchored_watching(self, chain: str) -> list[SettlementRecord]:
        """Watched settlements of ``chain`` not included anywhere we know of: what is looked
        up by hash again after a rebase (their txs may sit below the window, never scanned)."""
        t = s.settlements
        with self._reader.connect() as conn:
            rows = (
                conn.execute(
                    select(t).where(
                        t.c.chain == chain,
                        t.c.watching.is_(True),
                        t.c.block_number.is_(None),
                        t.c.replaced_block_number.is_(None),
                        t.c.kind.not_in(ADDRESS_KINDS),
                    )
                )
                .mappings()
                .all()
            )
        return [from_row(SettlementRecord, r) for r in rows]

    def any_deadline_due(self, chain: str, now: int, late_watch_ms: int) -> bool:
        """Whether a watched settlement of ``chain`` has a time-only change due."""
        params = {"q_chain": chain, "q_now": now, "q_cut": now - late_watch_ms}
        with self._reader.connect() as conn:
            row = conn.execute(pq.any_deadline_due(), params).first()
        return row is not None


def _settlement_values(new: NewSettlement) -> dict[str, Any]:
    """The row a registration inserts."""
    return {
        "settlement_id": new.settlement_id,
        "chain": new.chain,
        "tx_hash": new.tx_hash,
        "required_confirmations": new.required_confirmations,
        "finality_mode": new.finality_mode,
        "timeout_ms": new.timeout_ms,
        "initiated_at": new.initiated_at,
        "deadline": new.deadline,
        "verdict": new.decision["verdict"],
        "watching": True,
        "reorg_count": 0,
        "digest": new.digest,
        "decision": new.decision,
        "dependent_state": new.dependent_state,
        "commit_url": new.commit_url,
        # A payment has no tx to look up by hash: never due for a probe.
        "next_probe_at": None if new.kind in ADDRESS_KINDS else new.initiated_at,
        "probe_count": 0,
        "created_at": new.initiated_at,
        "updated_at": new.initiated_at,
        "provisional": new.provisional,
        "sender": new.sender,
        "nonce": new.nonce,
        "raw_tx": new.raw_tx,
        "owner": new.owner,
        "kind": new.kind,
    }


def owned_ids(db: Db, settlement_ids: Iterable[str], owner: str) -> set[str]:
    """Those of ``settlement_ids`` that belong to ``owner`` (500 per statement)."""
    t = s.settlements
    return owned_rows(db, t.c.settlement_id, t.c.owner, settlement_ids, owner)


def owned_rows(
    db: Db, id_column: Any, owner_column: Any, ids: Iterable[str], owner: str
) -> set[str]:
    """Those of ``ids`` (values of ``id_column``) whose row's ``owner_column`` is ``owner``,
    500 per statement (settlements, workflows)."""
    wanted = sorted(set(ids))
    found: set[str] = set()
    with db.connect() as conn:
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            rows = conn.execute(
                select(id_column).where(id_column.in_(chunk), owner_column == owner)
            ).all()
            found.update(str(r[0]) for r in rows)
    return found


settlement_values = _settlement_values
"""The row a registration inserts (public for :mod:`watcher.store.listing_store`'s batch)."""
