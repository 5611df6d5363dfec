"""The delivery outbox, and provisional registrations.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

AutoId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "deliveries",
        sa.Column("id", AutoId, primary_key=True, autoincrement=True),
        sa.Column("settlement_id", sa.String(64)),
        sa.Column("event_id", sa.BigInteger),
        sa.Column("channel", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("idempotency_key", sa.String(96), nullable=False, unique=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", sa.BigInteger, nullable=False),
        sa.Column("last_error", sa.Text),
        sa.Column("last_status", sa.Integer),
        sa.Column("body", sa.JSON),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.Column("delivered_at", sa.BigInteger),
    )
    op.create_index("ix_deliveries_due", "deliveries", ["state", "next_attempt_at"])
    op.create_index("ix_deliveries_settlement", "deliveries", ["settlement_id"])
    with op.batch_alter_table("settlements") as batch:
        batch.add_column(
            sa.Column("provisional", sa.Boolean, nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("settlements") as batch:
        batch.drop_column("provisional")
    op.drop_table("deliveries")
