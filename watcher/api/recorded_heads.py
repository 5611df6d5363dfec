"""The chain heads every view shows: the ones the chains' owners recorded in the store.

Only the owner of a chain (the holder of its lease) follows the chain's head; a standby's
tracker stays where it was when it last owned the chain (or at nothing). Behind a load
balancer a request reaches any instance, so a head or a depth taken from the answering
instance's memory would differ by instance, and a user polling a standby for depth would
wait for ever. The owner writes the head in the same transaction as each block's effects
(inclusions, verdicts), so the stored head is also the one those effects were decided at.
"""

from __future__ import annotations

from watcher.store import ChainRecord, Store
from watcher.store.errors import StoreUnavailable


def recorded_head(store: Store, chain: str) -> int | None:
    """The stored head number of ``chain`` (None before its first block is processed)."""
    record = store.chain(chain)
    return record.head_number if record is not None else None


class HeadsOnce:
    """Every chain's recorded head, read from the store at most once (on first use): an
    answer that shows many settlements (a batch of 1,000, a listing page) reads the heads in
    one query instead of one per settlement (a listing answers under load). Made per answer, never kept: what it
    shows is the head stored when the answer began to be built, as a fresh read would."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._chains: dict[str, ChainRecord] | None = None

    def __call__(self, chain: str) -> int | None:
        """The stored head number of ``chain`` (None before its first block is processed)."""
        record = self._read().get(chain)
        return record.head_number if record is not None else None

    def finalized(self, chain: str) -> int | None:
        """The stored ``finalized`` block of ``chain`` (None when not recorded), from the
        same read as the heads."""
        record = self._read().get(chain)
        return record.finalized_number if record is not None else None

    def _read(self) -> dict[str, ChainRecord]:
        if self._chains is None:
            self._chains = dict(self._store.chains())
        return self._chains


def recorded_heads(store: Store) -> tuple[dict[str, ChainRecord], str | None]:
    """Every chain's stored position, and None; or nothing and why, when the store cannot
    be read (for ``/healthz``, which must answer even then: not ready, with the reason)."""
    try:
        return store.chains(), None
    except StoreUnavailable as exc:  # the reason names the error type only: no URL, no secret
        return {}, str(exc)
