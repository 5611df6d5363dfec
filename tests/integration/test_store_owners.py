"""Settlements belong to their caller (issue 14), on SQLite and PostgreSQL: the same tx
registered by two owners is two settlements; every read for a caller filters by owner."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import create_engine, text

from tests.integration.helpers import START_MS, random_tx_hash
from watcher.config.chains import ChainConfig
from watcher.store import Store
from watcher.store.db import normalise_url
from watcher.store.migrate import MIGRATIONS

CHAIN = ChainConfig.model_validate(
    {"name": "local", "chain_id": 31337, "rpc": ["http://127.0.0.1:1"], "confirmations": 3}
)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    st = Store.open(store_url)
    yield st
    st.close()


def _migrate_to(store_url: str, revision: str) -> None:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    engine = create_engine(normalise_url(store_url))
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
    finally:
        engine.dispose()


def test_rows_written_before_0008_belong_to_anonymous(store_url: str) -> None:
    """A database at 0007 with a settlement in it: after 0008 the row is still there, owned
    by "anonymous", and a second owner can register the same tx."""
    _migrate_to(store_url, "0007")
    tx = random_tx_hash()
    engine = create_engine(normalise_url(store_url))
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO settlements (settlement_id, chain, tx_hash,"
                    " required_confirmations, finality_mode, timeout_ms, initiated_at, deadline,"
                    " verdict, watching, reorg_count, digest, decision, probe_count, created_at,"
                    " updated_at) VALUES ('stl_old', 'local', :tx, 3, 'depth', 1000, :t, :t,"
                    " 'AWAITING_FINALITY', true, 0, 'd', '{}', 0, :t, :t)"
                ),
                {"tx": tx, "t": START_MS},
            )
    finally:
        engine.dispose()
    st = Store.open(store_url)
    try:
        old = st.settlement("stl_old")
        assert old.owner == "anonymous"
        assert old.tx_hash == tx
    finally:
        st.close()
