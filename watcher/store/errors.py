"""Errors of the store.

::

    StoreError(Exception)
    ├── SchemaVersionUnknown     the database was migrated by a newer (or foreign) version
    ├── StoreMismatch            stored facts contradict the config (a chain name reused)
    ├── SettlementNotFound(LookupError)
    └── StaleFencingToken       a write carried a fencing token that is no longer the lease's
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


class StaleFencingToken(StoreError):
    """A chain-processing write carried a fencing token that is no longer its lease's.

    The writer lost its lease (it paused past the lease and another instance took over, or it
    released it): nothing of the write was stored, and the refusal itself was recorded.
    """

    def __init__(
        self, name: str, owner: str, token: int, current_owner: str | None, current: int | None
    ) -> None:
        super().__init__(
            f"{name}: write by {owner} with fencing token {token} refused; the lease is now "
            f"token {current} held by {current_owner or 'nobody'}"
        )
        self.name = name
        self.owner = owner
        self.token = token
        self.current_owner = current_owner
        self.current_token = current
