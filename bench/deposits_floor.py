"""The floor under a block of deposits, measured in the same run as the watcher
(:mod:`bench.deposits_cost`): what this machine's CPU spends on the least any watcher of
this design must do for a block that brings 1,000 deposits and makes 1,000 earlier ones
final, with no logic of ours in it.

- **Decode**: ``json.loads`` of the block's three answers (the block with its txs, its
  receipts, its token logs), as the node serves them.
- **Store**: in a copy of the watcher's own SQLite database (same schema, same indexes,
  same rows), with the stdlib's ``sqlite3`` and one ``executemany`` a table, in one
  transaction committed as the watcher commits (WAL, ``synchronous=NORMAL``): the 1,000 new
  deposits (settlement, deposit and transfer rows, and their ``deposit_seen`` events, copied
  from the last block's under fresh random ids, as the watcher's are), 1,000 settlements
  updated to their final decision (a stored final decision's JSON and digest) and their
  ``deposit_confirmed`` events. Measured in the steady state of one long-lived connection,
  as the watcher's is: two blocks' writes first, then the median of five.

Until the twelfth stop the floor gave the new rows ids that sorted together (a prefix on
the copied ones) and timed the second block of a fresh copy: the first made the index
writes of a block look clustered (about 15 ms, warm), the second timed a cold WAL file
(about 95 ms). The watcher's ids are hashes, spread over every index they are keys of.

The ratio of the watcher's CPU per block to this floor says what our own logic costs on
top of the machine, whichever machine runs it; the absolute target (100 ms a block) is
below the floor on a slow enough machine.
"""

from __future__ import annotations

import json
import secrets
import shutil
import sqlite3
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests


@dataclass(frozen=True)
class Floor:
    """CPU seconds of the floor's two parts."""

    decode: float
    store: float

    @property
    def total(self) -> float:
        return self.decode + self.store


def decode_floor(url: str, block: int, token: str) -> float:
    """CPU seconds ``json.loads`` takes over the three answers of ``block`` (fetched here
    as raw bytes, uncounted)."""
    calls: list[tuple[str, list[Any]]] = [
        ("eth_getBlockByNumber", [hex(block), True]),
        ("eth_getBlockReceipts", [hex(block)]),
        ("eth_getLogs", [{"fromBlock": hex(block), "toBlock": hex(block), "address": [token]}]),
    ]
    raw = [
        requests.post(
            url, json={"jsonrpc": "2.0", "id": 1, "method": m, "params": p}, timeout=60
        ).content
        for m, p in calls
    ]
    start = time.process_time()
    for body in raw:
        json.loads(body)
    return time.process_time() - start


def store_floor(
    database: Path, workdir: Path, deposits: int, warm: int = 2, runs: int = 5
) -> float:
    """CPU seconds of a block's writes done bare (see the module doc) in a copy of
    ``database`` (closed by the watcher: its WAL checkpointed), on one connection: ``warm``
    blocks' writes (its page cache and WAL file as a running watcher's), then the median of
    ``runs`` more."""
    copy = workdir / "floor.db"
    shutil.copyfile(database, copy)
    conn = sqlite3.connect(copy, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # as the watcher (watcher/store/db.py)
        spent = [_writes(conn, deposits) for _ in range(warm + runs)]
    finally:
        conn.close()
    return statistics.median(spent[warm:])


def _fresh_id(old: str) -> str:
    """A new id of the same shape (``dep_`` and hex digits): as random as the watcher's."""
    prefix, _, digits = old.rpartition("_")
    return f"{prefix}_{secrets.token_hex(len(digits) // 2 or 12)}" if prefix else old


def _writes(conn: sqlite3.Connection, n: int) -> float:
    """One block's writes, under fresh random ids; CPU seconds from the first insert to the
    commit."""
    deposit = "kind = 'evm_deposit'"
    new = _rows(
        conn,
        f"SELECT * FROM settlements WHERE {deposit} AND verdict = 'AWAITING_FINALITY'"
        f" AND settlement_id LIKE 'dep%' ORDER BY seq DESC LIMIT {n}",
    )
    ids = [r["settlement_id"] for r in new]
    fresh = {i: _fresh_id(i) for i in ids}
    marks = ",".join("?" * len(ids))
    seen = _events(conn, "deposit_seen", n)
    rows = {
        "settlements": [
            {
                **r,
                "seq": None,
                "settlement_id": fresh[r["settlement_id"]],
                "tx_hash": fresh[r["settlement_id"]],  # a deposit's own id (no tx of its own)
            }
            for r in new
        ],
        "deposits": [
            {**r, "settlement_id": fresh[r["settlement_id"]]}
            for r in _rows(conn, f"SELECT * FROM deposits WHERE settlement_id IN ({marks})", ids)
        ],
        "payment_transfers": [
            {**r, "id": None, "settlement_id": fresh[r["settlement_id"]]}
            for r in _rows(
                conn, f"SELECT * FROM payment_transfers WHERE settlement_id IN ({marks})", ids
            )
        ],
        "events": [
            {**e, "settlement_id": sid} for e, sid in zip(seen, fresh.values(), strict=False)
        ]
        + [
            {**e, "settlement_id": sid}
            for e, sid in zip(_events(conn, "deposit_confirmed", n), ids, strict=False)
        ],
    }
    final = conn.execute(
        "SELECT decision, digest FROM settlements WHERE verdict = 'FINALITY_CONFIRMED'"
        f" AND {deposit} LIMIT ?",
        (n,),
    ).fetchall()
    waiting = [r["settlement_id"] for r in new]  # the last block's: still awaiting
    updates = [(d, g, sid) for (d, g), sid in zip(final, waiting, strict=False)]
    start = time.process_time()
    conn.execute("BEGIN")
    for table, values in rows.items():
        if values:
            names = list(values[0])
            conn.executemany(
                f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                [tuple(v[k] for k in names) for v in values],
            )
    conn.executemany(
        "UPDATE settlements SET verdict = 'FINALITY_CONFIRMED', watching = 0, decision = ?,"
        " digest = ?, terminal_at = 1, updated_at = 1 WHERE settlement_id = ?",
        updates,
    )
    conn.execute("COMMIT")
    return time.process_time() - start


def _rows(
    conn: sqlite3.Connection, sql: str, args: list[str] | None = None
) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, args or [])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _events(conn: sqlite3.Connection, kind: str, n: int) -> list[dict[str, Any]]:
    return [
        {**r, "id": None}
        for r in _rows(conn, f"SELECT * FROM events WHERE kind = '{kind}' LIMIT {n}")
    ]
