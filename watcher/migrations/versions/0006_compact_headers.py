"""Compact headers: every field that goes into a header's hash, beside its row, so that a
receipt's header chain costs no JSON-RPC call.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("headers", sa.Column("compact", sa.LargeBinary))


def downgrade() -> None:
    with op.batch_alter_table("headers") as batch:
        batch.drop_column("compact")
