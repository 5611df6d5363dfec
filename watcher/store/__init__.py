"""The durable store: SQLAlchemy, SQLite by default, PostgreSQL for several instances."""

from watcher.store.errors import (
    SchemaVersionUnknown,
    SettlementNotFound,
    StaleFencingToken,
    StoreError,
    StoreMismatch,
)
from watcher.store.records import (
    ChainRecord,
    EventRecord,
    NewSettlement,
    ReorgRecord,
    SettlementRecord,
    WatchEntry,
)
from watcher.store.store import BlockTxn, Store

__all__ = [
    "BlockTxn",
    "ChainRecord",
    "EventRecord",
    "NewSettlement",
    "ReorgRecord",
    "SchemaVersionUnknown",
    "SettlementNotFound",
    "SettlementRecord",
    "StaleFencingToken",
    "Store",
    "StoreError",
    "StoreMismatch",
    "WatchEntry",
]
