"""Indexes for the reads that grew with the settlements table: a poll's look for watched
payments and provisional settlements (each read every watched row of the chain and kept
none when there were none), and listing pages filtered by verdict (they walked the table in
``seq`` order, throwing away every row of another verdict).

Revision ID: 0019_perf_indexes
Revises: 0018_deposits
"""

from alembic import op

revision = "0019_perf_indexes"
down_revision = "0018_deposits"
branch_labels = None
depends_on = None

INDEXES = {
    "ix_settlements_kind": ["chain", "kind", "watching", "seq"],
    "ix_settlements_provisional": ["chain", "provisional", "watching"],
    "ix_settlements_verdict": ["verdict", "seq"],
}


def upgrade() -> None:
    for name, columns in INDEXES.items():
        op.create_index(name, "settlements", columns)


def downgrade() -> None:
    for name in INDEXES:
        op.drop_index(name, "settlements")
