"""Every table in one place (the deposits' and invoices' defined in schema_deposits.py and
imported here). Times are integer Unix milliseconds; hashes are 0x-hex strings.

The migrations under watcher/migrations create exactly these tables; a test checks that the
migrated database and this metadata agree, so neither drifts.
"""

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)

# The deposits' and invoices' tables are in their own module (this one would pass the size
# limit); importing them here puts them on ``metadata`` wherever the schema is used.
from watcher.store.schema_deposits import deposits as deposits
from watcher.store.schema_deposits import invoices as invoices
from watcher.store.schema_deposits import subscription_addresses as subscription_addresses
from watcher.store.schema_deposits import subscriptions as subscriptions
from watcher.store.schema_types import AutoId, Hash
from watcher.store.schema_types import metadata as metadata

SCHEMA_REVISION = "0022_deposit_ripe_index"
"""Alembic revision this code writes and reads."""


WATCHED_TXS = "watching AND kind NOT IN ('evm_payment', 'evm_deposit')"
"""The rows the poll's read of newly registered settlements looks for (watched, not an
address watch), written out as literal SQL: a partial index is used only by a query that
states its condition in the same words (migration 0022, ``ix_settlements_watched_txs``;
``guard.payment.ADDRESS_KINDS``, checked by tests/integration/test_due_ranges.py)."""


def _partial(name: str, keyed: str, *leading: str) -> Index:
    """An index on ``leading`` then ``keyed`` of only the rows whose ``keyed`` is set."""
    where = text(f"{keyed} IS NOT NULL")
    return Index(name, *leading, keyed, sqlite_where=where, postgresql_where=where)


chains = Table(
    "chains",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("chain_id", BigInteger, nullable=False),
    Column("head_number", BigInteger),
    Column("head_hash", Hash),
    Column("finalized_number", BigInteger),
    Column("updated_at", BigInteger, nullable=False),
)

headers = Table(
    "headers",
    metadata,
    Column("chain", String(64), primary_key=True),
    Column("number", BigInteger, primary_key=True),
    Column("hash", Hash, nullable=False),
    Column("parent_hash", Hash, nullable=False),
    Column("timestamp", BigInteger, nullable=False),
    # 0006: every field that goes into the header's hash (chains/block_facts.py), so that a
    # receipt's header chain is read from here, not fetched again; NULL when the node's
    # fields do not re-hash to its hash (or for rows written before 0006).
    Column("compact", LargeBinary),
)

settlements = Table(
    "settlements",
    metadata,
    Column("seq", AutoId, primary_key=True, autoincrement=True),
    Column("settlement_id", String(64), nullable=False, unique=True),
    Column("chain", String(64), nullable=False),
    Column("tx_hash", Hash, nullable=False),
    Column("required_confirmations", Integer, nullable=False),
    Column("finality_mode", String(32), nullable=False),
    Column("timeout_ms", BigInteger, nullable=False),
    Column("initiated_at", BigInteger, nullable=False),
    Column("deadline", BigInteger, nullable=False),
    Column("verdict", String(32), nullable=False),
    Column("watching", Boolean, nullable=False),
    Column("sender", String(42)),
    Column("nonce", BigInteger),
    Column("block_number", BigInteger),
    Column("block_hash", Hash),
    Column("tx_index", Integer),
    Column("receipt_status", Integer),
    Column("replaced_by", Hash),
    Column("replaced_block_number", BigInteger),
    Column("replaced_block_hash", Hash),
    Column("confirm_height", BigInteger),
    Column("reorg_count", Integer, nullable=False),
    Column("digest", String(80), nullable=False),
    Column("decision", JSON, nullable=False),
    Column("dependent_state", JSON),
    Column("commit_url", Text),
    Column("next_probe_at", BigInteger),
    Column("probe_count", Integer, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("terminal_at", BigInteger),
    Column("raw_tx", Text),
    Column("provisional", Boolean, nullable=False, server_default=false()),
    # 0008: the API caller the settlement belongs to (watcher/api/auth.py's Caller.name);
    # one tx registered by two callers is two settlements. Rows from before: "anonymous".
    Column("owner", String(64), nullable=False, server_default="anonymous"),
    # 0009: "evm_tx" (a watched tx, and the rows of off-chain sources) or "evm_payment" (a
    # payment to an address: its tx_hash holds its own settlement id, which no tx matches;
    # its spec and counted transfers are in payment_specs / payment_transfers).
    Column("kind", String(32), nullable=False, server_default="evm_tx"),
    # 0022: a deposit's lowest counted block (NULL for other kinds): with ``confirm_height``
    # (set for a deposit whose rule has a depth basis), how a block finds the deposits it
    # may make final by index ranges (watcher/store/deposits_ripe.py).
    Column("transfer_block", BigInteger),
    UniqueConstraint("chain", "tx_hash", "owner", name="uq_settlements_chain_tx_owner"),
    # 0020: the indexes on a column that most rows (deposits, payments, a tx not yet
    # included) hold NULL keep only the rows that have it; every query on them compares the
    # column, which no NULL satisfies.
    _partial("ix_settlements_confirm", "confirm_height", "chain", "watching"),
    Index("ix_settlements_deadline", "chain", "watching", "deadline"),
    _partial("ix_settlements_block", "block_number", "chain"),
    _partial("ix_settlements_replaced", "replaced_block_number", "chain"),
    _partial("ix_settlements_probe", "next_probe_at", "chain", "watching"),
    _partial("ix_settlements_transfer_block", "transfer_block", "chain", "watching"),
    _partial("ix_settlements_watched_block", "block_number", "chain", "watching"),
    _partial("ix_settlements_watched_replaced", "replaced_block_number", "chain", "watching"),
    Index(
        "ix_settlements_watched_txs",
        "chain",
        "seq",
        sqlite_where=text(WATCHED_TXS),
        postgresql_where=text(WATCHED_TXS),
    ),
    Index("ix_settlements_owner", "owner", "seq"),
    # 0019: a poll's reads of watched payments and provisional settlements, and listing
    # pages by verdict, each a range of an index, not every watched (or stored) row.
    Index("ix_settlements_kind", "chain", "kind", "watching", "seq"),
    Index("ix_settlements_provisional", "chain", "provisional", "watching"),
    Index("ix_settlements_verdict", "verdict", "seq"),
)

reorgs = Table(
    "reorgs",
    metadata,
    Column("id", AutoId, primary_key=True, autoincrement=True),
    Column("chain", String(64), nullable=False),
    Column("detected_at", BigInteger, nullable=False),
    Column("depth", Integer, nullable=False),
    Column("ancestor_number", BigInteger, nullable=False),
    Column("ancestor_hash", Hash, nullable=False),
    Column("old_head_number", BigInteger, nullable=False),
    Column("old_head_hash", Hash, nullable=False),
    Column("new_head_number", BigInteger, nullable=False),
    Column("new_head_hash", Hash, nullable=False),
    Column("replaced", JSON, nullable=False),
    Column("touched", JSON, nullable=False),
    Column("finality_violation", Boolean, nullable=False),
    Index("ix_reorgs_chain", "chain", "id"),
)

events = Table(
    "events",
    metadata,
    Column("id", AutoId, primary_key=True, autoincrement=True),
    Column("chain", String(64), nullable=False),
    Column("settlement_id", String(64)),
    Column("kind", String(32), nullable=False),
    Column("severity", String(16), nullable=False),
    Column("payload", JSON, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_events_settlement", "settlement_id"),
)

# -- 0002: receipts and signers -----------------------------------------------------------

receipts = Table(
    "receipts",
    metadata,
    Column("id", AutoId, primary_key=True, autoincrement=True),
    Column("settlement_id", String(64), nullable=False),
    Column("kind", String(48), nullable=False),
    Column("signer", String(42), nullable=False),
    Column("digest", String(80), nullable=False),
    Column("body", JSON, nullable=False),
    Column("revokes", BigInteger),
    Column("created_at", BigInteger, nullable=False),
    Index("ix_receipts_settlement", "settlement_id", "id"),
)

signers = Table(
    "signers",
    metadata,
    Column("address", String(42), primary_key=True),
    Column("first_used_at", BigInteger, nullable=False),
    Column("retired_at", BigInteger),
    Column("source", String(32), nullable=False),
)

# -- 0003: the delivery outbox --------------------------------------------------------------

deliveries = Table(
    "deliveries",
    metadata,
    Column("id", AutoId, primary_key=True, autoincrement=True),
    Column("settlement_id", String(64)),
    Column("event_id", BigInteger),
    Column("channel", String(32), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("url", Text, nullable=False),
    Column("idempotency_key", String(96), nullable=False, unique=True),
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", BigInteger, nullable=False),
    Column("last_error", Text),
    Column("last_status", Integer),
    Column("body", JSON),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    Column("delivered_at", BigInteger),
    Index("ix_deliveries_due", "state", "next_attempt_at"),
    Index("ix_deliveries_settlement", "settlement_id"),
)

# -- 0004: leases with fencing tokens, handoffs ----------------------------------------------

leases = Table(
    "leases",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("owner", String(128)),
    Column("token", BigInteger, nullable=False),
    Column("acquired_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
)
"""One row per chain or source name: who owns its processing, until when, and the fencing
token (only ever increases) every processing write must carry. ``expires_at`` 0: released."""

handoffs = Table(
    "handoffs",
    metadata,
    Column("id", AutoId, primary_key=True, autoincrement=True),
    Column("name", String(64), nullable=False),
    Column("from_owner", String(128)),
    Column("from_token", BigInteger),
    Column("to_owner", String(128), nullable=False),
    Column("to_token", BigInteger, nullable=False),
    Column("reason", String(16), nullable=False),
    Column("verdict", String(32), nullable=False),
    Column("elements", JSON, nullable=False),
    Column("recovery", JSON, nullable=False),
    Column("at", BigInteger, nullable=False),
    Index("ix_handoffs_name", "name", "id"),
)
"""Every takeover: who handed what to whom, the guard's verdict, the four signed recorded
elements and what recovery ran."""

fencing_rejections = Table(
    "fencing_rejections",
    metadata,
    Column("id", AutoId, primary_key=True, autoincrement=True),
    Column("name", String(64), nullable=False),
    Column("owner", String(128), nullable=False),
    Column("token", BigInteger, nullable=False),
    Column("current_owner", String(128)),
    Column("current_token", BigInteger),
    Column("at", BigInteger, nullable=False),
)
"""Writes the store refused because their fencing token was stale (proof of the fence)."""

# -- 0005: the webhook inbox ----------------------------------------------------------------

webhook_inbox = Table(
    "webhook_inbox",
    metadata,
    Column("id", AutoId, primary_key=True, autoincrement=True),
    Column("source", String(64), nullable=False),
    Column("ref", String(128), nullable=False),
    Column("event_id", String(128), nullable=False),
    Column("event", JSON, nullable=False),
    Column("received_by", String(128), nullable=False),
    Column("received_at", BigInteger, nullable=False),
    Column("applied_at", BigInteger),
    Column("applied_by", String(128)),
    Column("applied_token", BigInteger),
    UniqueConstraint("source", "event_id", name="uq_webhook_inbox_event"),
    Index("ix_webhook_inbox_pending", "source", "applied_at", "id"),
)
"""Signed webhook events (Stripe) as received, by any instance, before anything is decided:
the source's lease owner applies them under its fencing token and marks them applied, so a
webhook received by a standby is never lost and never applied by a stale owner."""

# -- 0007: the leaves of blocks receipts were built from -------------------------------------

block_leaves = Table(
    "block_leaves",
    metadata,
    Column("chain", String(64), primary_key=True),
    Column("block_hash", Hash, primary_key=True),
    Column("number", BigInteger, nullable=False),
    Column("leaves", LargeBinary, nullable=False),
    Index("ix_block_leaves_number", "chain", "number"),
)
"""Per block a receipt was built from: its tx hashes and both tries' leaves, compressed
(watcher/store/leaves_store.py), so later receipts of the block (after a restart too) need
no call."""

# -- 0009: payments to an address ------------------------------------------------------------

payment_specs = Table(
    "payment_specs",
    metadata,
    Column("settlement_id", String(64), primary_key=True),
    Column("chain", String(64), nullable=False),
    Column("to_address", String(42), nullable=False),
    Column("asset", String(42), nullable=False),
    Column("amount", String(80), nullable=False),
    Column("sender", String(42)),
    Column("after_block", BigInteger),
    Column("reference", String(128)),
    Index("ix_payment_specs_to", "chain", "to_address"),
)
"""What an ``evm_payment`` settlement waits for: ``amount`` (decimal base units) of ``asset``
("native" or a token contract) to ``to_address``, from ``sender`` when given, in blocks above
``after_block`` (the stored head at registration; NULL: none was stored yet)."""

payment_transfers = Table(
    "payment_transfers",
    metadata,
    Column("id", AutoId, primary_key=True, autoincrement=True),
    Column("settlement_id", String(64), nullable=False),
    Column("chain", String(64), nullable=False),
    Column("tx_hash", Hash, nullable=False),
    Column("block_number", BigInteger, nullable=False),
    Column("block_hash", Hash, nullable=False),
    Column("tx_index", Integer, nullable=False),
    Column("log_index", Integer),
    Column("sender", String(42), nullable=False),
    Column("value", String(80), nullable=False),
    Index("ix_payment_transfers_settlement", "settlement_id", "id"),
    Index("ix_payment_transfers_block", "chain", "block_number"),
)
"""The transfers counted for a payment, while their block is canonical: a reorg deletes the
ones above its common ancestor (``log_index`` NULL: a native transfer, the tx itself)."""

# -- 0010: callers' multi-step workflows under the handoff guard ------------------------------

workflows = Table(
    "workflows",
    metadata,
    Column("seq", AutoId, primary_key=True, autoincrement=True),
    Column("workflow_id", String(64), nullable=False, unique=True),
    Column("owner", String(64), nullable=False),
    Column("reference", String(128)),
    Column("holder", String(128), nullable=False),
    Column("token", BigInteger, nullable=False),
    Column("acquired_at", BigInteger, nullable=False),
    Column("lease_expires_at", BigInteger, nullable=False),
    Column("lease_ms", BigInteger, nullable=False),
    Column("expiry_noted", Boolean, nullable=False),
    Column("steps", JSON, nullable=False),
    Column("idempotent_steps", JSON, nullable=False),
    Column("checkpoint_digest", String(80), nullable=False),
    Column("handoff", JSON, nullable=False),
    Column("created_at", BigInteger, nullable=False),
    Column("updated_at", BigInteger, nullable=False),
    UniqueConstraint("owner", "reference", name="uq_workflows_owner_reference"),
    Index("ix_workflows_owner", "owner", "seq"),
    Index("ix_workflows_lease", "expiry_noted", "lease_expires_at"),
)
"""A caller's multi-step work (watcher/workflows/): its steps and their states, the lease
(holder, fencing token, ``lease_expires_at`` 0 once released) that lives here so any daemon
instance answers, the digest of the checkpoint the last write recorded, and the last lock
change's guard verdict and four signed receipts (``handoff``)."""

# -- 0011: Ethereum consensus: the light client's verified committee chain ---------------------

consensus_data = Table(
    "consensus_data",
    metadata,
    Column("chain", String(64), primary_key=True),
    Column("checkpoint", Hash, primary_key=True),
    Column("period", BigInteger, primary_key=True),
    Column("bootstrap", Text),
    Column("update_answer", Text),
)
"""Per chain and checkpoint, the Beacon API answers a verified committee chain was built
from (watcher/store/consensus_store.py), so a restarted daemon asks for none again: at the
checkpoint's period its ``bootstrap``, at each later period the ``update_answer`` that
handed its committee over (JSON text, as served)."""
