"""Callers' multi-step workflows under the handoff guard: the ``workflows`` table.

Revision ID: 0010_workflows
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_workflows"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workflows",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("workflow_id", sa.String(64), nullable=False, unique=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("reference", sa.String(128)),
        sa.Column("holder", sa.String(128), nullable=False),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.Column("acquired_at", sa.BigInteger, nullable=False),
        sa.Column("lease_expires_at", sa.BigInteger, nullable=False),
        sa.Column("lease_ms", sa.BigInteger, nullable=False),
        sa.Column("expiry_noted", sa.Boolean, nullable=False),
        sa.Column("steps", sa.JSON, nullable=False),
        sa.Column("idempotent_steps", sa.JSON, nullable=False),
        sa.Column("checkpoint_digest", sa.String(80), nullable=False),
        sa.Column("handoff", sa.JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("owner", "reference", name="uq_workflows_owner_reference"),
    )
    op.create_index("ix_workflows_owner", "workflows", ["owner", "seq"])
    op.create_index("ix_workflows_lease", "workflows", ["expiry_noted", "lease_expires_at"])


def downgrade() -> None:
    op.drop_index("ix_workflows_lease", "workflows")
    op.drop_index("ix_workflows_owner", "workflows")
    op.drop_table("workflows")
