"""Initial schema: chains, header window, settlements, reorgs, events.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

AutoId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Hash = sa.String(66)


def upgrade() -> None:
    """The five tables and their indexes, in this order (one helper per table group)."""
    _chains_and_headers()
    _settlements()
    _reorgs_and_events()


def _chains_and_headers() -> None:
    op.create_table(
        "chains",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("chain_id", sa.BigInteger, nullable=False),
        sa.Column("head_number", sa.BigInteger),
        sa.Column("head_hash", Hash),
        sa.Column("finalized_number", sa.BigInteger),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "headers",
        sa.Column("chain", sa.String(64), primary_key=True),
        sa.Column("number", sa.BigInteger, primary_key=True),
        sa.Column("hash", Hash, nullable=False),
        sa.Column("parent_hash", Hash, nullable=False),
        sa.Column("timestamp", sa.BigInteger, nullable=False),
    )


def _settlements() -> None:
    op.create_table(
        "settlements",
        sa.Column("seq", AutoId, primary_key=True, autoincrement=True),
        sa.Column("settlement_id", sa.String(64), nullable=False, unique=True),
        sa.Column("chain", sa.String(64), nullable=False),
        sa.Column("tx_hash", Hash, nullable=False),
        sa.Column("required_confirmations", sa.Integer, nullable=False),
        sa.Column("finality_mode", sa.String(32), nullable=False),
        sa.Column("timeout_ms", sa.BigInteger, nullable=False),
        sa.Column("initiated_at", sa.BigInteger, nullable=False),
        sa.Column("deadline", sa.BigInteger, nullable=False),
        sa.Column("verdict", sa.String(32), nullable=False),
        sa.Column("watching", sa.Boolean, nullable=False),
        sa.Column("sender", sa.String(42)),
        sa.Column("nonce", sa.BigInteger),
        sa.Column("block_number", sa.BigInteger),
        sa.Column("block_hash", Hash),
        sa.Column("tx_index", sa.Integer),
        sa.Column("receipt_status", sa.Integer),
        sa.Column("replaced_by", Hash),
        sa.Column("replaced_block_number", sa.BigInteger),
        sa.Column("replaced_block_hash", Hash),
        sa.Column("confirm_height", sa.BigInteger),
        sa.Column("reorg_count", sa.Integer, nullable=False),
        sa.Column("digest", sa.String(80), nullable=False),
        sa.Column("decision", sa.JSON, nullable=False),
        sa.Column("dependent_state", sa.JSON),
        sa.Column("commit_url", sa.Text),
        sa.Column("next_probe_at", sa.BigInteger),
        sa.Column("probe_count", sa.Integer, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.Column("terminal_at", sa.BigInteger),
        sa.UniqueConstraint("chain", "tx_hash", name="uq_settlements_chain_tx"),
    )
    op.create_index(
        "ix_settlements_confirm", "settlements", ["chain", "watching", "confirm_height"]
    )
    op.create_index("ix_settlements_deadline", "settlements", ["chain", "watching", "deadline"])
    op.create_index("ix_settlements_block", "settlements", ["chain", "block_number"])
    op.create_index("ix_settlements_replaced", "settlements", ["chain", "replaced_block_number"])


def _reorgs_and_events() -> None:
    op.create_table(
        "reorgs",
        sa.Column("id", AutoId, primary_key=True, autoincrement=True),
        sa.Column("chain", sa.String(64), nullable=False),
        sa.Column("detected_at", sa.BigInteger, nullable=False),
        sa.Column("depth", sa.Integer, nullable=False),
        sa.Column("ancestor_number", sa.BigInteger, nullable=False),
        sa.Column("ancestor_hash", Hash, nullable=False),
        sa.Column("old_head_number", sa.BigInteger, nullable=False),
        sa.Column("old_head_hash", Hash, nullable=False),
        sa.Column("new_head_number", sa.BigInteger, nullable=False),
        sa.Column("new_head_hash", Hash, nullable=False),
        sa.Column("replaced", sa.JSON, nullable=False),
        sa.Column("touched", sa.JSON, nullable=False),
        sa.Column("finality_violation", sa.Boolean, nullable=False),
    )
    op.create_index("ix_reorgs_chain", "reorgs", ["chain", "id"])
    op.create_table(
        "events",
        sa.Column("id", AutoId, primary_key=True, autoincrement=True),
        sa.Column("chain", sa.String(64), nullable=False),
        sa.Column("settlement_id", sa.String(64)),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_events_settlement", "events", ["settlement_id"])


def downgrade() -> None:
    for table in ("events", "reorgs", "settlements", "headers", "chains"):
        op.drop_table(table)
