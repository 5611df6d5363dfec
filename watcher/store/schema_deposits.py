"""The deposits' (standing address watches) and invoices' (fresh addresses) tables, part of
the schema (watcher/store/schema.py imports them; migration 0018_deposits creates them)."""

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from watcher.store.schema_types import AutoId, Hash, metadata

subscriptions = Table(
    "subscriptions",
    metadata,
    Column("subscription_id", String(64), primary_key=True),
    Column("chain", String(64), nullable=False),
    Column("owner", String(64), nullable=False),
    Column("assets", Text, nullable=False),
    Column("confirmations", Integer),
    Column("commit_url", Text),
    Column("reference", String(128)),
    Column("after_block", BigInteger),
    Column("active", Boolean, nullable=False),
    Column("created_at", BigInteger, nullable=False),
)
"""A standing watch over addresses of one chain (watcher/store/deposits_store.py): ``assets``
is a JSON list (``native`` and token contracts); ``confirmations`` NULL: the chain's rule;
``active`` false once deleted (deposits already seen still go to final)."""

subscription_addresses = Table(
    "subscription_addresses",
    metadata,
    Column("seq", AutoId, primary_key=True, autoincrement=True),
    Column("subscription_id", String(64), nullable=False),
    Column("chain", String(64), nullable=False),
    Column("address", String(42), nullable=False),
    Column("after_block", BigInteger),
    UniqueConstraint("subscription_id", "address", name="uq_subscription_address"),
    Index("ix_subscription_addresses_chain", "chain", "seq"),
)
"""The watched addresses of a subscription (lower-case 0x); transfers count in blocks above
``after_block`` (the stored head when the address was added)."""

deposits = Table(
    "deposits",
    metadata,
    Column("settlement_id", String(64), primary_key=True),
    Column("subscription_id", String(64), nullable=False),
    Column("chain", String(64), nullable=False),
    Column("tx_hash", Hash, nullable=False),
    Column("ordinal", Integer, nullable=False),
    Column("address", String(42), nullable=False),
    Column("asset", String(42), nullable=False),
    Column("amount", String(80)),
    Column("sender", String(42)),
    Index("ix_deposits_subscription", "subscription_id"),
)
"""One transfer seen to a subscription's address: an ``evm_deposit`` settlement, its spec
here (since 0021: ``address``, ``asset``, ``amount`` and ``sender``, exactly what arrived; no
``payment_specs`` row), its transfer in ``payment_transfers`` while its block is canonical.
``ordinal`` tells apart several transfers of one tx to the same address and asset; the
settlement id is derived from (subscription, tx, asset, address, ordinal), so a deposit is
stored once however often its tx is seen."""

invoices = Table(
    "invoices",
    metadata,
    Column("invoice_id", String(64), primary_key=True),
    Column("settlement_id", String(64), nullable=False, unique=True),
    Column("owner", String(64), nullable=False),
    Column("key_id", String(64), nullable=False),
    Column("derivation_index", BigInteger, nullable=False),
    Column("address", String(42), nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Column("payment_uri", Text, nullable=False),
    Column("state", String(32), nullable=False),
    Column("accepted", Boolean, nullable=False),
    UniqueConstraint("key_id", "derivation_index", name="uq_invoice_index"),
)
"""An invoice: its ``evm_payment`` settlement to the address derived at ``derivation_index``
of the extended public key ``key_id`` names (unique: an index is never used twice, across
restarts and instances); ``state`` as last recorded (new, processing, settled, expired,
invalid, paid_partial, paid_over, paid_late); ``accepted``: the operator took a late payment."""
