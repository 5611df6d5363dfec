"""The webhook inbox: a payment processor's signed events, kept until the source's owner
applied them (several instances: any one may receive a webhook, only the lease owner
decides).

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

AutoId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "webhook_inbox",
        sa.Column("id", AutoId, primary_key=True, autoincrement=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("ref", sa.String(128), nullable=False),
        sa.Column("event_id", sa.String(128), nullable=False),
        sa.Column("event", sa.JSON, nullable=False),
        sa.Column("received_by", sa.String(128), nullable=False),
        sa.Column("received_at", sa.BigInteger, nullable=False),
        sa.Column("applied_at", sa.BigInteger),
        sa.Column("applied_by", sa.String(128)),
        sa.Column("applied_token", sa.BigInteger),
        sa.UniqueConstraint("source", "event_id", name="uq_webhook_inbox_event"),
    )
    op.create_index("ix_webhook_inbox_pending", "webhook_inbox", ["source", "applied_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_webhook_inbox_pending", "webhook_inbox")
    op.drop_table("webhook_inbox")
