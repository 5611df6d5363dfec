"""Receipts (signed evidence, revocations included), the signer addresses used, and the raw
signed bytes of a watched tx seen while pending (to prove a replacement later).

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

AutoId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "receipts",
        sa.Column("id", AutoId, primary_key=True, autoincrement=True),
        sa.Column("settlement_id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(48), nullable=False),
        sa.Column("signer", sa.String(42), nullable=False),
        sa.Column("digest", sa.String(80), nullable=False),
        sa.Column("body", sa.JSON, nullable=False),
        sa.Column("revokes", sa.BigInteger),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_receipts_settlement", "receipts", ["settlement_id", "id"])
    op.create_table(
        "signers",
        sa.Column("address", sa.String(42), primary_key=True),
        sa.Column("first_used_at", sa.BigInteger, nullable=False),
        sa.Column("retired_at", sa.BigInteger),
        sa.Column("source", sa.String(32), nullable=False),
    )
    with op.batch_alter_table("settlements") as batch:
        batch.add_column(sa.Column("raw_tx", sa.Text))
    op.create_index("ix_settlements_probe", "settlements", ["chain", "watching", "next_probe_at"])


def downgrade() -> None:
    op.drop_index("ix_settlements_probe", "settlements")
    with op.batch_alter_table("settlements") as batch:
        batch.drop_column("raw_tx")
    op.drop_table("signers")
    op.drop_table("receipts")
