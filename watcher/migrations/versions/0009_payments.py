"""Payments to an address: settlements.kind ("evm_tx" for every row before), the payment's
spec and the transfers counted for it.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("settlements") as batch:
        batch.add_column(sa.Column("kind", sa.String(32), nullable=False, server_default="evm_tx"))
    op.create_table(
        "payment_specs",
        sa.Column("settlement_id", sa.String(64), primary_key=True),
        sa.Column("chain", sa.String(64), nullable=False),
        sa.Column("to_address", sa.String(42), nullable=False),
        sa.Column("asset", sa.String(42), nullable=False),
        sa.Column("amount", sa.String(80), nullable=False),
        sa.Column("sender", sa.String(42)),
        sa.Column("after_block", sa.BigInteger),
        sa.Column("reference", sa.String(128)),
    )
    op.create_index("ix_payment_specs_to", "payment_specs", ["chain", "to_address"])
    op.create_table(
        "payment_transfers",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("settlement_id", sa.String(64), nullable=False),
        sa.Column("chain", sa.String(64), nullable=False),
        sa.Column("tx_hash", sa.String(66), nullable=False),
        sa.Column("block_number", sa.BigInteger, nullable=False),
        sa.Column("block_hash", sa.String(66), nullable=False),
        sa.Column("tx_index", sa.Integer, nullable=False),
        sa.Column("log_index", sa.Integer),
        sa.Column("sender", sa.String(42), nullable=False),
        sa.Column("value", sa.String(80), nullable=False),
    )
    op.create_index("ix_payment_transfers_settlement", "payment_transfers", ["settlement_id", "id"])
    op.create_index("ix_payment_transfers_block", "payment_transfers", ["chain", "block_number"])


def downgrade() -> None:
    op.drop_index("ix_payment_transfers_block", "payment_transfers")
    op.drop_index("ix_payment_transfers_settlement", "payment_transfers")
    op.drop_table("payment_transfers")
    op.drop_index("ix_payment_specs_to", "payment_specs")
    op.drop_table("payment_specs")
    with op.batch_alter_table("settlements") as batch:
        batch.drop_column("kind")
