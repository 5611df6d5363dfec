"""Ethereum consensus: the Beacon API answers of each chain's verified committee chain
(bootstrap at the checkpoint, one hand-over per period), kept across restarts.

Revision ID: 0011_consensus
Revises: 0010_workflows
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_consensus"
down_revision = "0010_workflows"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "consensus_data",
        sa.Column("chain", sa.String(64), primary_key=True),
        sa.Column("checkpoint", sa.String(66), primary_key=True),
        sa.Column("period", sa.BigInteger, primary_key=True),
        sa.Column("bootstrap", sa.Text),
        sa.Column("update_answer", sa.Text),
    )


def downgrade() -> None:
    op.drop_table("consensus_data")
