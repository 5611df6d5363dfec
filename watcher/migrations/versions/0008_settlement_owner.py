"""Settlement owners: a settlement belongs to the API caller that registered it, so the same
tx registered by two callers is two settlements, each with its own dependent state,
commit_url and delivery (callers authenticate; one caller never sees another's). Rows written before belong to "anonymous" (the caller of
an API without tokens).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("settlements") as batch:
        batch.add_column(
            sa.Column("owner", sa.String(64), nullable=False, server_default="anonymous")
        )
        batch.drop_constraint("uq_settlements_chain_tx", type_="unique")
        batch.create_unique_constraint(
            "uq_settlements_chain_tx_owner", ["chain", "tx_hash", "owner"]
        )
    op.create_index("ix_settlements_owner", "settlements", ["owner", "seq"])


def downgrade() -> None:
    # Refuses (unique violation) while one tx has settlements of several owners: merging
    # them would drop a caller's dependent state.
    op.drop_index("ix_settlements_owner", "settlements")
    with op.batch_alter_table("settlements") as batch:
        batch.drop_constraint("uq_settlements_chain_tx_owner", type_="unique")
        batch.create_unique_constraint("uq_settlements_chain_tx", ["chain", "tx_hash"])
        batch.drop_column("owner")
