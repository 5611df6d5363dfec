"""Errors of the store.

::

    StoreError(Exception)
    ├── SchemaVersionUnknown     the database was migrated by a newer (or foreign) version
    ├── StoreMismatch            stored facts contradict the config (a chain name reused)
    └── SettlementNotFound(LookupError)
"""


class StoreError(Exception):
    """Base of the store's errors in normal operation."""


class SchemaVersionUnknown(StoreError):
    """The database carries a schema revision this version does not know: refuse to touch it."""

    def __init__(self, url: str, revision: str) -> None:
        super().__init__(
            f"store {url}: schema revision {revision!r} is unknown to this version of "
            "finality-watcher (written by a newer version?); refusing to run against it"
        )
        self.revision = revision


class StoreMismatch(StoreError):
    """Stored facts contradict the configuration."""


class SettlementNotFound(StoreError, LookupError):
    """No settlement with that id (or chain and tx hash)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"no settlement {key}")
        self.key = key
