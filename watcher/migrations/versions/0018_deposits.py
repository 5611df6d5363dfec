"""Deposits and invoices: standing address watches (subscriptions, their addresses, the
deposits seen for them) and invoices at fresh addresses derived from an xpub.

Revision ID: 0018_deposits
Revises: 0011_consensus
"""

import sqlalchemy as sa
from alembic import op

revision = "0018_deposits"
down_revision = "0011_consensus"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "subscriptions",
        sa.Column("subscription_id", sa.String(64), primary_key=True),
        sa.Column("chain", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("assets", sa.Text, nullable=False),
        sa.Column("confirmations", sa.Integer),
        sa.Column("commit_url", sa.Text),
        sa.Column("reference", sa.String(128)),
        sa.Column("after_block", sa.BigInteger),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "subscription_addresses",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("subscription_id", sa.String(64), nullable=False),
        sa.Column("chain", sa.String(64), nullable=False),
        sa.Column("address", sa.String(42), nullable=False),
        sa.Column("after_block", sa.BigInteger),
        sa.UniqueConstraint("subscription_id", "address", name="uq_subscription_address"),
    )
    op.create_index("ix_subscription_addresses_chain", "subscription_addresses", ["chain", "seq"])
    op.create_table(
        "deposits",
        sa.Column("settlement_id", sa.String(64), primary_key=True),
        sa.Column("subscription_id", sa.String(64), nullable=False),
        sa.Column("chain", sa.String(64), nullable=False),
        sa.Column("tx_hash", sa.String(66), nullable=False),
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("address", sa.String(42), nullable=False),
        sa.Column("asset", sa.String(42), nullable=False),
    )
    op.create_index("ix_deposits_subscription", "deposits", ["subscription_id"])
    op.create_table(
        "invoices",
        sa.Column("invoice_id", sa.String(64), primary_key=True),
        sa.Column("settlement_id", sa.String(64), nullable=False, unique=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("derivation_index", sa.BigInteger, nullable=False),
        sa.Column("address", sa.String(42), nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.Column("payment_uri", sa.Text, nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("accepted", sa.Boolean, nullable=False),
        sa.UniqueConstraint("key_id", "derivation_index", name="uq_invoice_index"),
    )


def downgrade() -> None:
    op.drop_table("invoices")
    op.drop_index("ix_deposits_subscription", "deposits")
    op.drop_table("deposits")
    op.drop_index("ix_subscription_addresses_chain", "subscription_addresses")
    op.drop_table("subscription_addresses")
    op.drop_table("subscriptions")
