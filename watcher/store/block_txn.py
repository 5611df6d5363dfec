"""The writes of one unit of work for a chain (usually one block), in one transaction.

A block's header, the head pointer, inclusion changes, verdicts, reorg and alert events and
the outbox rows they cause are written through one :class:`BlockTxn`: a ``kill -9`` at any
instant leaves either all of a block's effects or none of them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection

from guard.payment import ADDRESS_KINDS
from guard.settlement import Verdict
from watcher.store import block_queries as queries
from watcher.store import schema as s
from watcher.store.driver_sql import statement
from watcher.store.events_store import insert_event, insert_events
from watcher.store.outbox_store import NewDelivery, cancel_undelivered, enqueue
from watcher.store.records import SettlementRecord, from_row
from watcher.store.refs import SettlementRef


def _bound(column: str) -> Any:
    """A parameter ``b_<column>`` of the settlements column's own type (its JSON encoding)."""
    return bindparam("b_" + column, type_=s.settlements.c[column].type)


@functools.cache
def _update_of(columns: tuple[str, ...]) -> Any:
    """The update of a settlement's ``columns`` (and ``updated_at``), built once per set of
    columns (a handful: a decision, an inclusion, a reorg, watching), as bound parameters
    ``b_<column>``: a block that decides a hundred settlements spent most of its time
    building a hundred statements."""
    t = s.settlements
    values = {c: _bound(c) for c in columns}
    return (
        update(t)
        .where(t.c.settlement_id == bindparam("b_id"))
        .values({**values, "updated_at": bindparam("b_now")})
    )


class BlockTxn:
    """The writes of one unit of work (usually one block), inside one transaction."""

    def __init__(self, conn: Connection, chain: str, now: int) -> None:
        self.conn = conn
        self.chain = chain
        self.now = now

    # -- head ----------------------------------------------------------------------------

    def put_header(
        self,
        number: int,
        block_hash: str,
        parent_hash: str,
        timestamp: int,
        keep: int,
        compact: bytes | None = None,
    ) -> None:
        """Store a new head header, prune the window below ``keep`` headers, move the head;
        ``compact``: the header's hashed fields (chains/block_facts.py), for receipts."""
        put_headers(self, [(number, block_hash, parent_hash, timestamp, compact)], keep)

    def rewind(self, ancestor_number: int) -> None:
        """Drop stored headers above the common ancestor of a reorg."""
        h = s.headers
        self.conn.execute(delete(h).where(h.c.chain == self.chain, h.c.number > ancestor_number))

    def set_finalized(self, number: int) -> None:
        """Remember the chain's latest ``finalized`` block."""
        self.conn.execute(
            update(s.chains).where(s.chains.c.name == self.chain).values(finalized_number=number)
        )

    def record_reorg(self, **values: Any) -> int:
        """Insert a reorg event; returns its id."""
        result = self.conn.execute(
            insert(s.reorgs).values(chain=self.chain, detected_at=self.now, **values)
        )
        key = result.inserted_primary_key
        assert key is not None
        return int(key[0])

    # -- settlements ---------------------------------------------------------------------

    def _records(self, statement: Any, **params: Any) -> list[SettlementRecord]:
        """The settlements a statement built once (watcher/store/block_queries.py) selects
        with ``params`` (``q_<name>``) and this chain."""
        rows = self.conn.execute(statement, {"q_chain": self.chain, **params}).mappings().all()
        return [from_row(SettlementRecord, r) for r in rows]

    def _settlements(self, *conditions: Any) -> list[SettlementRecord]:
        t = s.settlements
        rows = (
            self.conn.execute(
                select(t).where(t.c.chain == self.chain, *conditions).order_by(t.c.seq)
            )
            .mappings()
            .all()
        )
        return [from_row(SettlementRecord, r) for r in rows]

    def by_ids(self, ids: Sequence[str]) -> list[SettlementRecord]:
        """Settlements of this chain with the given ids, in registration order, read on the
        driver's cursor (watcher/store/driver_sql.py), a statement per list size
        (block_queries.ID_BUCKETS): in a catch-up SQLAlchemy's work cost several times SQLite's."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        top = queries.ID_BUCKETS[-1]
        found: list[SettlementRecord] = []
        for start in range(0, len(unique), top):
            part = unique[start : start + top]
            size = next(b for b in queries.ID_BUCKETS if b >= len(part))
            part += [part[-1]] * (size - len(part))  # a repeated id selects nothing more
            values = {"q_chain": self.chain, **{f"q_id{i}": sid for i, sid in enumerate(part)}}
            build = functools.partial(queries.by_id_list, size)
            read = statement(self.conn, ("settlements_by_ids", size), build)
            found += [from_row(SettlementRecord, r) for r in read.rows(self.conn, values)]
        if len(unique) > top:  # each slice in registration order, and so the whole
            found.sort(key=lambda r: r.seq)
        return found

    def anchored_above(self, number: int) -> list[SettlementRecord]:
        """Settlements whose inclusion or replacing tx sits above ``number`` (any verdict)."""
        t = s.settlements
        return self._settlements(or_(t.c.block_number > number, t.c.replaced_block_number > number))

    def decided_between(self, low: int, high: int) -> list[SettlementRecord]:
        """Confirmed or failed settlements whose inclusion (or replacing tx) sits in blocks
        ``low < n <= high``: those whose evidence may name a head above ``high``."""
        t = s.settlements
        anchor = func.coalesce(t.c.block_number, t.c.replaced_block_number)
        return self._settlements(
            t.c.verdict.in_([Verdict.FINALITY_CONFIRMED, Verdict.SETTLEMENT_FAILED]),
            t.c.kind.not_in(ADDRESS_KINDS),
            anchor > low,
            anchor <= high,
        )

    def anchored_in(self, block_hashes: Sequence[str]) -> list[SettlementRecord]:
        """Settlements whose inclusion or replacing tx sits in one of ``block_hashes``."""
        if not block_hashes:
            return []
        t = s.settlements
        hashes = list(block_hashes)
        return self._settlements(
            or_(t.c.block_hash.in_(hashes), t.c.replaced_block_hash.in_(hashes))
        )

    def due(self, head: int, finalized: int | None, late_watch_ms: int) -> list[SettlementRecord]:
        """Watched settlements a verdict may change for: depth reached, finalized, deadline
        passed while awaiting, or the late-finality watch of a timed-out one ended."""
        statement = queries.due(finalized is not None)
        at = {"q_head": head, "q_now": self.now, "q_cut": self.now - late_watch_ms}
        return self._records(
            statement, **at, **({} if finalized is None else {"q_finalized": finalized})
        )

    def due_span(
        self, first: int, head: int, finalized: int | None, late_watch_ms: int
    ) -> list[tuple[SettlementRecord, bool]]:
        """:meth:`due` at ``head``, each with whether it is due at ``first`` (<= ``head``)
        already: a catch-up's stretch of blocks asks once what two :meth:`due` would tell
        (only the depth reached depends on the head)."""
        with_finalized = finalized is not None
        build = functools.partial(queries.due_span, with_finalized)
        at = {
            "q_head": head,
            "q_first": first,
            "q_now": self.now,
            "q_cut": self.now - late_watch_ms,
        }
        if finalized is not None:
            at["q_finalized"] = finalized
        # On the driver's cursor (as by_ids): asked at every run of a catch-up's blocks.
        read = statement(self.conn, ("settlements_due_span", with_finalized), build)
        rows = read.rows(self.conn, {"q_chain": self.chain, **at})
        return [(from_row(SettlementRecord, r), bool(r["due_first"])) for r in rows]

    def _update(self, settlement_id: str, **values: Any) -> None:
        self._update_many(tuple(sorted(values)), {settlement_id: values})

    def set_inclusion(
        self,
        record: SettlementRecord,
        block_number: int,
        block_hash: str,
        tx_index: int,
        status: int,
        sender: str | None,
        nonce: int | None,
        scanned: bool = False,
    ) -> None:
        """The watched tx is in ``block_hash`` with ``status``. ``scanned``: found by the
        block scan, which stands for the look-up by hash a new registration is due: a reorg
        taking the inclusion away leaves no look-up due to read its place from the old branch."""
        self._update(
            record.settlement_id,
            block_number=block_number,
            block_hash=block_hash,
            tx_index=tx_index,
            receipt_status=status,
            sender=sender or record.sender,
            nonce=record.nonce if nonce is None else nonce,
            confirm_height=block_number + record.required_confirmations - 1,
            **({"probe_count": 1} if scanned and record.probe_count == 0 else {}),
        )

    def set_replacement(
        self, record: SettlementRecord, replaced_by: str, block_number: int, block_hash: str
    ) -> None:
        """Another tx with the same sender and nonce is in ``block_hash``."""
        self._update(
            record.settlement_id,
            replaced_by=replaced_by,
            replaced_block_number=block_number,
            replaced_block_hash=block_hash,
            confirm_height=block_number + record.required_confirmations - 1,
        )

    def clear_anchor(self, record: SettlementRecord) -> None:
        """A reorg removed the inclusion (or the replacing tx): back to not included."""
        self._update(
            record.settlement_id,
            block_number=None,
            block_hash=None,
            tx_index=None,
            receipt_status=None,
            replaced_by=None,
            replaced_block_number=None,
            replaced_block_hash=None,
            confirm_height=None,
            reorg_count=record.reorg_count + 1,
        )

    def set_senders(self, seen: Sequence[tuple[SettlementRecord, str, int, str | None]]) -> None:
        """Remember who sent each watched tx, its nonce and its signed bytes (seen pending;
        None keeps the bytes the record had): (record, sender, nonce, signed bytes), in one
        statement executed for every row."""
        rows = {
            rec.settlement_id: {"sender": sender, "nonce": nonce, "raw_tx": raw_tx or rec.raw_tx}
            for rec, sender, nonce, raw_tx in seen
        }
        self._update_many(("nonce", "raw_tx", "sender"), rows)

    def set_probes(self, probes: Sequence[tuple[SettlementRecord, int]]) -> None:
        """When to look each tx up by hash again: (record, next probe time), in one
        statement executed for every row: a poll probing 1,000 new txs made 1,000
        statements, a third of the poller's time under batch registration."""
        rows = {
            rec.settlement_id: {"next_probe_at": at, "probe_count": rec.probe_count + 1}
            for rec, at in probes
        }
        self._update_many(("next_probe_at", "probe_count"), rows)

    def _update_many(self, columns: tuple[str, ...], rows: Mapping[str, Mapping[str, Any]]) -> None:
        """The update of ``columns`` (:func:`_update_of`), run for each settlement id of
        ``rows`` with its values (one executemany)."""
        if not rows:
            return
        params = [
            {"b_id": sid, "b_now": self.now, **{"b_" + c: values[c] for c in columns}}
            for sid, values in rows.items()
        ]
        # One executemany on the driver's cursor (watcher/store/driver_sql.py): a block
        # finalizing 1,000 deposits spent a fifth of this in SQLAlchemy's per-row work.
        update = statement(self.conn, ("settlements_update", columns), lambda: _update_of(columns))
        update.run_many(self.conn, params)

    def save_decision(
        self,
        record: SettlementRecord,
        verdict: str,
        digest: str,
        decision: dict[str, Any],
        watching: bool,
        terminal: bool,
    ) -> None:
        """Store a new decision for the settlement."""
        self._update(
            record.settlement_id,
            verdict=verdict,
            digest=digest,
            decision=decision,
            watching=watching,
            terminal_at=(record.terminal_at or self.now) if terminal else None,
        )

    def save_decisions(
        self, rows: Sequence[tuple[SettlementRef, str, str, dict[str, Any], bool, bool]]
    ) -> None:
        """Store new decisions, (record, verdict, digest, decision, watching, terminal)
        each, in one statement executed for every row (a block's final deposits)."""
        values = {
            rec.settlement_id: {
                "verdict": verdict,
                "digest": digest,
                "decision": decision,
                "watching": watching,
                "terminal_at": (rec.terminal_at or self.now) if terminal else None,
            }
            for rec, verdict, digest, decision, watching, terminal in rows
        }
        self._update_many(("decision", "digest", "terminal_at", "verdict", "watching"), values)

    def stop_watching(self, record: SettlementRecord) -> None:
        """No longer follow this settlement (late-finality horizon passed, or reported)."""
        self._update(record.settlement_id, watching=False)

    def add_event(
        self, kind: str, severity: str, payload: dict[str, Any], settlement_id: str | None = None
    ) -> None:
        """Record an alert or lifecycle event."""
        self.record_event(kind, severity, payload, settlement_id)

    def record_event(
        self, kind: str, severity: str, payload: dict[str, Any], settlement_id: str | None = None
    ) -> int:
        """Record an event and return its id (deliveries refer to it)."""
        return insert_event(self.conn, self.chain, kind, severity, payload, settlement_id, self.now)

    def record_events(
        self, events: Sequence[tuple[str, str, dict[str, Any], str | None]], ids: bool = True
    ) -> list[int]:
        """Record events ((kind, severity, payload, settlement id) each) in one statement;
        returns their ids in the same order (none unless ``ids``)."""
        return insert_events(self.conn, self.chain, events, self.now, returning=ids)

    def enqueue_delivery(self, new: NewDelivery) -> bool:
        """Put a delivery in the outbox, in this transaction; False if its key exists."""
        return enqueue(self.conn, new, self.now)

    def cancel_deliveries(self, settlement_id: str, kinds: Sequence[str], reason: str) -> int:
        """Cancel the settlement's undelivered commit-channel rows of ``kinds``."""
        return cancel_undelivered(self.conn, settlement_id, kinds, self.now, reason)

    def provisional_in_progress(self) -> list[SettlementRecord]:
        """Included, still awaiting, provisional settlements with a commit URL."""
        return self._records(queries.provisional_in_progress())


def put_headers(
    txn: BlockTxn, headers: Sequence[tuple[int, str, str, int, bytes | None]], keep: int
) -> None:
    """:meth:`BlockTxn.put_header` for consecutive new heads (number, hash, parent hash,
    timestamp, compact) at once: one insert of them all, one prune, one head move (a
    catch-up's quiet blocks, which need nothing else written). Only the last ``keep`` are
    inserted: the prune would delete the others in the same transaction."""
    if not headers:
        return
    first, last = headers[0], headers[-1]
    cut = last[0] - keep
    txn.conn.execute(queries.headers_from(), {"q_chain": txn.chain, "q_number": first[0]})
    txn.conn.execute(
        queries.insert_headers(),
        [
            {
                "chain": txn.chain,
                "number": number,
                "hash": block_hash,
                "parent_hash": parent,
                "timestamp": timestamp,
                "compact": compact,
            }
            for number, block_hash, parent, timestamp, compact in headers
            if number > cut
        ],
    )
    prune = {"q_chain": txn.chain, "q_number": cut}
    txn.conn.execute(queries.headers_up_to(), prune)
    head = {"q_chain": txn.chain, "q_number": last[0], "q_hash": last[1], "q_now": txn.now}
    txn.conn.execute(queries.move_head(), head)
