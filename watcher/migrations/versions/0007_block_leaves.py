"""Block leaves: the tx hashes and both tries' leaves of each block a receipt was built from,
so later receipts of that block (after a restart too) are built without a call.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "block_leaves",
        sa.Column("chain", sa.String(64), primary_key=True),
        sa.Column("block_hash", sa.String(66), primary_key=True),
        sa.Column("number", sa.BigInteger, nullable=False),
        sa.Column("leaves", sa.LargeBinary, nullable=False),
    )
    op.create_index("ix_block_leaves_number", "block_leaves", ["chain", "number"])


def downgrade() -> None:
    op.drop_index("ix_block_leaves_number", "block_leaves")
    op.drop_table("block_leaves")
