"""Filling a store with many settlements fast, for the scale tests and benchmarks.

Registering a million settlements through the API or the store's batch takes most of an
hour on a shared 2-core machine; what the scale figures need is only that the rows are
there, in the store's own schema, with the mix a long-running daemon accumulates: most
decided long ago (``watching`` false, included in a block), a minority still watched. The
rows are built from one real registration's values (watcher/store/settlements_store.py's
``settlement_values``), each with its own id and tx hash, and written by ``COPY`` on
PostgreSQL (a multi-row INSERT elsewhere). PostgreSQL's table is then analysed, as its
autovacuum would soon do, so the planner sees its real size; SQLite's is not: the store
never runs ``ANALYZE`` there, and with statistics SQLite's planner picks other plans (it
scans the table for a poll's ``due`` read rather than walk the watched rows by index).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

from sqlalchemy import insert

from watcher.config.chains import ChainConfig
from watcher.settlements import Registration, new_settlement, settlement_id_for
from watcher.store import Store
from watcher.store import schema as s
from watcher.store.settlements_store import settlement_values

DECIDED = "FINALITY_CONFIRMED"
CHUNK = 20_000


def _rows(
    chain: ChainConfig, total: int, watched: int, owner: str, now: int
) -> Iterator[dict[str, Any]]:
    """``total`` settlement rows of ``chain``; every ``total // watched``-th one watched
    (spread over the table, as registration order would leave them: looked up by hash once,
    not found, the next look-up a day away), the others decided."""
    template = settlement_values(new_settlement(Registration(chain, "0x" + "0" * 64), now))
    template["owner"] = owner
    every = max(1, total // max(1, watched)) if watched else 0
    salt = secrets.token_hex(4)  # two fills of one schema never collide
    kept = 0
    for n in range(total):
        tx_hash = f"0x{salt}{n:056x}"
        row = dict(template, tx_hash=tx_hash)
        row["settlement_id"] = settlement_id_for(chain.name, tx_hash, owner)
        if every and n % every == 0 and kept < watched:
            kept += 1
            row.update(probe_count=1, next_probe_at=now + 86_400_000)
        else:
            block = 1 + n % 1_000_000
            row.update(
                verdict=DECIDED,
                watching=False,
                next_probe_at=None,
                block_number=block,
                block_hash=f"0x{block:064x}",
                tx_index=0,
                receipt_status=1,
                confirm_height=block + template["required_confirmations"],
                terminal_at=now,
                decision=dict(template["decision"], verdict=DECIDED),
            )
        yield row


def bulk_fill(
    store: Store,
    chain: ChainConfig,
    total: int,
    watched: int,
    *,
    owner: str = "anonymous",
    now: int = 1_700_000_000_000,
) -> None:
    """Store ``total`` settlements of ``chain`` for ``owner``, ``watched`` of them watched
    (the chain must be known to the store: ``ensure_chain``); on PostgreSQL, ANALYZE the
    table."""
    rows = _rows(chain, total, watched, owner, now)
    engine = store.writer.engine
    if engine.dialect.name != "postgresql":
        with store.writer.begin() as conn:
            chunk: list[dict[str, Any]] = []
            for row in rows:
                chunk.append(row)
                if len(chunk) == CHUNK:
                    conn.execute(insert(s.settlements), chunk)
                    chunk = []
            if chunk:
                conn.execute(insert(s.settlements), chunk)
        return
    columns = [c.name for c in s.settlements.columns if c.name != "seq"]
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        with cursor.copy(f"COPY settlements ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                row["decision"] = json.dumps(row["decision"])
                copy.write_row([row.get(c) for c in columns])
        cursor.execute("ANALYZE settlements")
        raw.commit()
    finally:
        raw.close()
