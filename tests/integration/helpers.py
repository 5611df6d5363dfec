"""Building blocks for integration tests beside the engine rig (tests/support/rigs.py):
stored rows made by hand, hashes no node knows, a transport that lags.

Everything here talks to real services (a real anvil, a real SQLite file or PostgreSQL
schema).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import create_engine, insert, text

from chains.rpc import Web3Transport
from tests.support.anvil import Anvil
from watcher.clock import wall_clock_ms
from watcher.delivery.format import RECEIPT_KINDS
from watcher.store import NewSettlement, Store, schema
from watcher.store.db import normalise_url
from watcher.store.migrate import MIGRATIONS


def numbered_settlement(n: int, **fields: Any) -> NewSettlement:
    """A settlement row of chain ``local`` numbered ``n`` (id and tx hash from it), awaiting,
    registered at 1 s with a minute to wait; ``fields`` replace any of its values."""
    values: dict[str, Any] = {
        "settlement_id": f"stl_{n:024x}",
        "chain": "local",
        "tx_hash": f"0x{n:064x}",
        "required_confirmations": 3,
        "finality_mode": "depth",
        "timeout_ms": 60_000,
        "initiated_at": 1_000,
        "deadline": 61_000,
        "digest": "sha256:" + "0" * 64,
        "decision": {"verdict": "AWAITING_FINALITY"},
    }
    return NewSettlement(**(values | fields))


def random_tx_hash() -> str:
    """A well-formed hash no node knows."""
    return "0x" + secrets.token_hex(32)


def wait_included(anvil: Anvil, tx_hash: str) -> int:
    """The block number of ``tx_hash`` once mined (automine may lag the send)."""
    return int(anvil.receipt(tx_hash)["blockNumber"], 16)


class LaggingTransport:
    """A real transport that, when ``lag_to`` is set, answers ``latest`` with an older block.

    It asks the real node for block ``lag_to`` instead of ``latest``: a real answer from a
    real node, just as a load-balanced node that is behind would give.
    """

    def __init__(self, inner: Web3Transport) -> None:
        self.inner = inner
        self.endpoint = inner.endpoint
        self.lag_to: int | None = None

    def request(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        if (
            self.lag_to is not None
            and method == "eth_getBlockByNumber"
            and params
            and params[0] == "latest"
        ):
            params = [hex(self.lag_to), *params[1:]]
        return self.inner.request(method, params)

    def batch(self, calls: Sequence[tuple[str, Sequence[Any]]]) -> list[Mapping[str, Any]]:
        return self.inner.batch(calls)


def store_receipt(store: Store, sid: str, kind: str, body: dict[str, Any]) -> None:
    """A signed receipt row as the receipts component stores it (its body as given), for
    tests of the delivery sender without a chain: a commit or discard waits for one."""
    with store._writer.begin() as conn:
        conn.execute(
            insert(schema.receipts).values(
                settlement_id=sid,
                kind=kind,
                signer="0x" + "ab" * 20,
                digest="sha256:" + "cd" * 32,
                body=body,
                created_at=wall_clock_ms(),
            )
        )


def sign_decision(store: Store, sid: str, verdict: str, decision_digest: str) -> None:
    """The receipt of ``verdict``'s kind made for the decision ``decision_digest``."""
    store_receipt(store, sid, RECEIPT_KINDS[verdict], {"decision_digest": decision_digest})


def migrate(store_url: str, step: str, revision: str) -> None:
    """Alembic's ``step`` (``"upgrade"`` or ``"downgrade"``) of the store at ``store_url`` to
    ``revision``, through the project's own migrations: a store left at an older schema, or
    taken back to one."""
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    engine = create_engine(normalise_url(store_url))
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            getattr(command, step)(cfg, revision)
    finally:
        engine.dispose()


def run_sql(store_url: str, sql: str) -> list[tuple[object, ...]]:
    """``sql`` run as it is on the store at ``store_url``, in a transaction of its own (rows
    written as an older schema wrote them, read back as stored); its rows, if any."""
    engine = create_engine(normalise_url(store_url))
    try:
        with engine.begin() as conn:
            result = conn.execute(text(sql))
            return [tuple(r) for r in result.all()] if result.returns_rows else []
    finally:
        engine.dispose()


def stored_text(store: Store, settlement_id: str) -> dict[str, Any]:
    """Every column of a settlement's row as the database's own text of it (NULL as None):
    two rows compared this way were stored alike, whatever wrote them."""
    with store.writer.connect() as conn:
        names = [
            r[0] for r in conn.execute(text("SELECT * FROM settlements LIMIT 0")).cursor.description
        ]
        columns = ", ".join(f'CAST("{n}" AS TEXT)' for n in names)
        row = conn.execute(
            text(f"SELECT {columns} FROM settlements WHERE settlement_id = :sid"),
            {"sid": settlement_id},
        ).one()
    return dict(zip(names, row, strict=True))


def stored_alike(store: Store, a: str, b: str, per_row: set[str]) -> dict[str, Any]:
    """Assert that settlements ``a`` and ``b`` were stored alike but for the ``per_row``
    columns (:func:`stored_text`); ``b``'s stored text."""
    left, right = stored_text(store, a), stored_text(store, b)
    assert {n: v for n, v in left.items() if n not in per_row} == {
        n: v for n, v in right.items() if n not in per_row
    }
    return right
