"""Errors of the store.

::

    StoreError(Exception)
    ├── SchemaVersionUnknown     the database was migrated by a newer (or foreign) version
    ├── StoreMismatch            stored facts contradict the config (a chain name reused)
    ├── SettlementNotFound(LookupError)
    ├── StaleFencingToken       a write carried a fencing token that is no longer the lease's
    ├── DeliveryNotFound(LookupError)  no delivery with that id
    ├── DeliveryNotReplayable   only a dead delivery can be replayed
    ├── StoreUnavailable        the database could not be reached or answered with an error
    └── StoreConflict           a write broke a uniqueness rule (the row exists already)

The last two are how database errors leave the store: ``watcher/store/db.py`` maps every
SQLAlchemy error at the edge (as ``chains/errors.py`` does for web3), so no code outside
``watcher/store/`` imports SQLAlchemy to catch one.
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


class StoreUnavailable(StoreError):
    """The database failed (unreachable, locked past the busy timeout, a broken connection).

    The message names the driver's error type only: a database error's text may carry the
    URL, and with it a password, and these messages reach logs, alerts and HTTP answers.
    """

    def __init__(self, cause: str) -> None:
        super().__init__(f"store unavailable ({cause})")
        self.cause = cause


class StoreConflict(StoreError):
    """A write broke a uniqueness rule: the row (or its key) is stored already."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"store conflict: {detail}")
        self.detail = detail


class DeliveryNotFound(StoreError, LookupError):
    """No delivery with that id."""

    def __init__(self, delivery_id: int) -> None:
        super().__init__(f"no delivery {delivery_id}")
        self.delivery_id = delivery_id


class DeliveryNotReplayable(StoreError):
    """Only a dead delivery can be replayed (others are delivered, or still being tried)."""

    def __init__(self, delivery_id: int, state: str) -> None:
        super().__init__(f"delivery {delivery_id} is {state}: only a dead delivery can be replayed")
        self.delivery_id = delivery_id
        self.state = state
