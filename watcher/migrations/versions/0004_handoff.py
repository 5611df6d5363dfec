"""Leases with fencing tokens, handoff records, refused (stale-token) writes.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

AutoId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(128)),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.Column("acquired_at", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "handoffs",
        sa.Column("id", AutoId, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("from_owner", sa.String(128)),
        sa.Column("from_token", sa.BigInteger),
        sa.Column("to_owner", sa.String(128), nullable=False),
        sa.Column("to_token", sa.BigInteger, nullable=False),
        sa.Column("reason", sa.String(16), nullable=False),
        sa.Column("verdict", sa.String(32), nullable=False),
        sa.Column("elements", sa.JSON, nullable=False),
        sa.Column("recovery", sa.JSON, nullable=False),
        sa.Column("at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_handoffs_name", "handoffs", ["name", "id"])
    op.create_table(
        "fencing_rejections",
        sa.Column("id", AutoId, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.Column("current_owner", sa.String(128)),
        sa.Column("current_token", sa.BigInteger),
        sa.Column("at", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("fencing_rejections")
    op.drop_index("ix_handoffs_name", "handoffs")
    op.drop_table("handoffs")
    op.drop_table("leases")
