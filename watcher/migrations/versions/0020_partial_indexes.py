"""Four settlement indexes kept only for the rows they can find: those on ``confirm_height``,
``block_number``, ``replaced_block_number`` and ``next_probe_at`` become partial (``WHERE
col IS NOT NULL``). Every query on those columns compares them (``<=``, ``>``, ``<``), which
no NULL satisfies, so both stores still use them; but a deposit (and a payment, an invoice)
has none of them, and writing a block of 1,000 deposits maintained four b-trees of NULL
keys per row for nothing.

Revision ID: 0020_partial_indexes
Revises: 0019_perf_indexes
"""

import sqlalchemy as sa
from alembic import op

revision = "0020_partial_indexes"
down_revision = "0019_perf_indexes"
branch_labels = None
depends_on = None

INDEXES = {
    "ix_settlements_confirm": (["chain", "watching", "confirm_height"], "confirm_height"),
    "ix_settlements_block": (["chain", "block_number"], "block_number"),
    "ix_settlements_replaced": (["chain", "replaced_block_number"], "replaced_block_number"),
    "ix_settlements_probe": (["chain", "watching", "next_probe_at"], "next_probe_at"),
}


def upgrade() -> None:
    for name, (columns, keyed) in INDEXES.items():
        op.drop_index(name, "settlements")
        where = sa.text(f"{keyed} IS NOT NULL")
        op.create_index(name, "settlements", columns, sqlite_where=where, postgresql_where=where)


def downgrade() -> None:
    for name, (columns, _keyed) in INDEXES.items():
        op.drop_index(name, "settlements")
        op.create_index(name, "settlements", columns)
