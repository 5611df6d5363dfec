"""Frozen rows of the store, so nothing outside the store handles SQLAlchemy rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from guard.settlement import Verdict

R = TypeVar("R")


def from_row(cls: type[R], row: Mapping[Any, Any]) -> R:
    """Build the record ``cls`` from a row mapping, taking only the fields it declares.

    The frozen dataclass's ``__init__`` is bypassed: it sets each field through
    ``object.__setattr__``, ~15 us for a settlement's 33 (a batch builds 1,000,
    a poll reads as many); a record class has no ``__post_init__`` to skip."""
    record: R = object.__new__(cls)
    record.__dict__.update({name: row[name] for name in _names(cls)})
    return record


def from_values(cls: type[R], values: Sequence[Any]) -> R:
    """:func:`from_row` from the fields' values in their declared order (a row read as a
    tuple: a block's ripe deposits build three records each from one row)."""
    record: R = object.__new__(cls)
    record.__dict__.update(zip(_names(cls), values, strict=True))  # a value a field, exactly
    return record


def _names(cls: type[Any]) -> tuple[str, ...]:
    """The field names of the record class ``cls``, in order (named once per class:
    ``fields`` per row was a fifth of a batch's read back)."""
    names = _FIELDS.get(cls)
    if names is None:
        assert not hasattr(cls, "__post_init__"), cls
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls))
    return names


_FIELDS: dict[type[Any], tuple[str, ...]] = {}
"""The field names of each record class :func:`_names` has named (once a class, not a row)."""


@dataclass(frozen=True)
class ChainRecord:
    """The stored position of one chain."""

    name: str
    """Configured name."""
    chain_id: int
    """EIP-155 id it was first stored with."""
    head_number: int | None
    """Last processed head."""
    head_hash: str | None
    """Hash of that head."""
    finalized_number: int | None
    """Last ``finalized`` block seen (for chains that use it)."""
    updated_at: int
    """When the head last moved (ms)."""


@dataclass(frozen=True)
class NewSettlement:
    """What a registration writes."""

    settlement_id: str
    """Deterministic id from chain and tx hash."""
    chain: str
    """Chain name."""
    tx_hash: str
    """Watched tx."""
    required_confirmations: int
    """N for this settlement."""
    finality_mode: str
    """``depth``, ``finalized`` or ``depth_or_finalized``."""
    timeout_ms: int
    """Caller's timeout."""
    initiated_at: int
    """Registration instant (ms); the timeout runs from here."""
    deadline: int
    """initiated_at + min(timeout, policy max wait)."""
    digest: str
    """Digest of the initial decision."""
    decision: dict[str, Any]
    """The initial decision as JSON."""
    dependent_state: dict[str, Any] | None = None
    """State to commit on finality (delivered by the outbox)."""
    commit_url: str | None = None
    """Where to deliver the commit or discard."""
    provisional: bool = False
    """Also deliver inclusion and depth updates before finality, marked provisional."""
    sender: str | None = None
    """The sender, when the caller gave it (with ``nonce``): no probe asks the node."""
    nonce: int | None = None
    """Its nonce, given with ``sender``."""
    raw_tx: str | None = None
    """The signed bytes, when the caller gave them (checked against the hash)."""
    owner: str = "anonymous"
    """The API caller it belongs to: (chain, tx hash, owner) is unique."""
    kind: str = "evm_tx"
    """``evm_tx`` or ``evm_payment`` (a payment to an address: ``tx_hash`` is its id)."""


@dataclass(frozen=True)
class SettlementRecord:
    """A settlement as stored."""

    seq: int
    """Insertion order (for incremental loading)."""
    settlement_id: str
    """Stable id."""
    chain: str
    """Chain name."""
    tx_hash: str
    """Watched tx."""
    required_confirmations: int
    """N."""
    finality_mode: str
    """How finality is decided."""
    timeout_ms: int
    """Caller's timeout."""
    initiated_at: int
    """Registration instant (ms)."""
    deadline: int
    """When waiting ends (ms)."""
    verdict: str
    """Current verdict name."""
    watching: bool
    """Still followed by the poller (awaiting, or timed out and watched for late finality)."""
    sender: str | None
    """``from`` of the tx, once seen."""
    nonce: int | None
    """Its nonce, once seen (replacement is detected by sender and nonce)."""
    block_number: int | None
    """Inclusion block, None while not included."""
    block_hash: str | None
    """Inclusion block hash."""
    tx_index: int | None
    """Position in the block."""
    receipt_status: int | None
    """1 success, 0 reverted."""
    replaced_by: str | None
    """Hash of the tx that consumed the same nonce, if any."""
    replaced_block_number: int | None
    """Block of that tx."""
    replaced_block_hash: str | None
    """Hash of that block."""
    confirm_height: int | None
    """Head height at which depth reaches N (for the index)."""
    reorg_count: int
    """How many reorgs touched it."""
    digest: str
    """Digest of the current decision."""
    decision: dict[str, Any]
    """Current decision as JSON (directive, evidence, deadline...)."""
    dependent_state: dict[str, Any] | None
    """Held dependent state."""
    commit_url: str | None
    """Where commits go."""
    next_probe_at: int | None
    """When to look the tx up by hash again (sender/nonce unknown)."""
    probe_count: int
    """Look-ups made so far."""
    created_at: int
    """Row creation (ms)."""
    updated_at: int
    """Last change (ms)."""
    terminal_at: int | None
    """When the verdict became terminal."""
    provisional: bool
    """Whether provisional (pre-finality) updates are delivered."""
    raw_tx: str | None
    """Signed raw bytes of the watched tx, kept while it was pending (replacement proof)."""
    owner: str = "anonymous"
    """The API caller it belongs to (``Caller.name``); only that caller reads it."""
    kind: str = "evm_tx"
    """``evm_tx`` (a tx, or an off-chain source's row) or ``evm_payment`` (a payment to an
    address: ``tx_hash`` holds its settlement id; watcher/store/payments_store.py)."""

    @property
    def verdict_enum(self) -> Verdict:
        """The verdict as the guard's enum."""
        return Verdict(self.verdict)


@dataclass(frozen=True)
class WatchEntry:
    """The poller's in-memory view of a watched settlement."""

    seq: int
    """Insertion order."""
    settlement_id: str
    """Id."""
    tx_hash: str
    """Tx to look for in new blocks."""
    sender: str | None
    """For replacement detection."""
    nonce: int | None
    """For replacement detection."""
    block_number: int | None
    """Current inclusion."""


@dataclass(frozen=True)
class ReorgRecord:
    """A stored reorg event."""

    id: int
    """Sequence."""
    chain: str
    """Chain name."""
    detected_at: int
    """When it was seen (ms)."""
    depth: int
    """Replaced blocks."""
    ancestor_number: int
    """Common ancestor height."""
    ancestor_hash: str
    """Common ancestor hash."""
    old_head_number: int
    """Head before."""
    old_head_hash: str
    """Its hash."""
    new_head_number: int
    """Head of the new branch when seen."""
    new_head_hash: str
    """Its hash."""
    replaced: list[dict[str, Any]]
    """``{number, old_hash, new_hash}`` per replaced height."""
    touched: list[str]
    """Settlement ids whose inclusion it removed."""
    finality_violation: bool
    """Whether it reversed a confirmed settlement."""


@dataclass(frozen=True)
class EventRecord:
    """An alert or lifecycle event."""

    id: int
    """Sequence."""
    chain: str
    """Chain name."""
    settlement_id: str | None
    """Settlement concerned, if any."""
    kind: str
    """``reorg``, ``finality_violation``, ``late_finality``, ``settlement_confirmed``..."""
    severity: str
    """``info``, ``warning`` or ``critical``."""
    payload: dict[str, Any]
    """Details."""
    created_at: int
    """When (ms)."""


@dataclass(frozen=True)
class InboxRecord:
    """A signed webhook event kept in the inbox (``webhook_inbox``) until applied."""

    id: int
    """Sequence (the order events are applied in)."""
    source: str
    """The source (its configured name) the event is for."""
    ref: str
    """The source's reference (a PaymentIntent id) it is about."""
    event_id: str
    """The sender's event id (a redelivery of it is stored once)."""
    event: dict[str, Any]
    """The verified event as received."""
    received_by: str
    """Instance that received it."""
    received_at: int
    """When (ms)."""
    applied_at: int | None
    """When the source's owner applied it; None while pending."""
    applied_by: str | None
    """The instance that applied it."""
    applied_token: int | None
    """The fencing token it was applied under (None: unfenced)."""


@dataclass(frozen=True)
class DeliveryRecord:
    """A delivery as stored."""

    id: int
    """Sequence (also the outbox order)."""
    settlement_id: str | None
    """Settlement concerned, if any."""
    event_id: int | None
    """Event reported (alerts) or the verdict's lifecycle event (commit/discard)."""
    channel: str
    """``commit``, ``webhook`` or ``slack``."""
    kind: str
    """``commit``, ``discard``, ``provisional`` or an event kind."""
    url: str
    """Target URL."""
    idempotency_key: str
    """Sent as ``Idempotency-Key``; the same for every attempt."""
    state: str
    """One of :data:`STATES`."""
    attempts: int
    """Claims so far (a crashed attempt counts); the fencing token of the current claim."""
    next_attempt_at: int
    """When it is due (pending), or when its lease ends (sending)."""
    last_error: str | None
    """Why the last attempt failed."""
    last_status: int | None
    """HTTP status of the last answer, if any."""
    body: dict[str, Any] | None
    """The body, once assembled; every attempt sends exactly these bytes."""
    created_at: int
    """Enqueued (ms)."""
    updated_at: int
    """Last change (ms)."""
    delivered_at: int | None
    """When a 2xx answer was received."""


@dataclass(frozen=True)
class ReceiptRecord:
    """A stored receipt."""

    id: int
    """Sequence (also the order of issue)."""
    settlement_id: str
    """Settlement it is about."""
    kind: str
    """One of guard.receipts.KINDS."""
    signer: str
    """0x address of the signing key."""
    digest: str
    """The receipt's ``sha256:`` digest (its id in revocations)."""
    body: dict[str, Any]
    """The whole signed receipt document."""
    revokes: int | None
    """For a revocation: the id of the receipt it withdraws."""
    created_at: int
    """When it was stored (ms)."""


@dataclass(frozen=True)
class SignerRecord:
    """A signing address the daemon has used."""

    address: str
    """0x lower-case address."""
    first_used_at: int
    """When the daemon first started with it (ms)."""
    retired_at: int | None
    """When another key replaced it; None for the current one."""
    source: str
    """Where the key came from: ``env``, ``keystore`` or ``dev``."""


@dataclass(frozen=True)
class Lease:
    """One lease row."""

    name: str
    """The chain or source name whose processing it guards."""
    owner: str | None
    """Instance holding it (or, once lapsed, that last held it)."""
    token: int
    """Fencing token: grows by one at every change of owner."""
    acquired_at: int
    """When the current owner acquired it (ms)."""
    expires_at: int
    """When it lapses unless renewed (ms); :data:`RELEASED` once given up."""
