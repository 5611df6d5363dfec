"""A deposit's spec in its own ``deposits`` row: ``amount`` and ``sender`` beside its
address and asset, no ``payment_specs`` row. A deposit's spec is exactly what arrived (its
transfer's value and sender), and a block of 1,000 new deposits wrote 1,000 spec rows (each
in two b-trees, one keyed on the random address) and read them back when they became final.
Existing deposits keep their amount and sender; their spec rows are deleted. The downgrade
writes the spec rows back (``after_block``: the block below the deposit's counted transfer,
as it was written; NULL when a reorg took it out).

Revision ID: 0021_deposit_specs
Revises: 0020_partial_indexes
"""

import sqlalchemy as sa
from alembic import op

revision = "0021_deposit_specs"
down_revision = "0020_partial_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("deposits", sa.Column("amount", sa.String(80)))
    op.add_column("deposits", sa.Column("sender", sa.String(42)))
    op.execute(
        "UPDATE deposits SET"
        " amount = (SELECT p.amount FROM payment_specs p"
        " WHERE p.settlement_id = deposits.settlement_id),"
        " sender = (SELECT p.sender FROM payment_specs p"
        " WHERE p.settlement_id = deposits.settlement_id)"
    )
    op.execute(
        "DELETE FROM payment_specs WHERE settlement_id IN (SELECT settlement_id FROM deposits)"
    )


def downgrade() -> None:
    op.execute(
        "INSERT INTO payment_specs"
        " (settlement_id, chain, to_address, asset, amount, sender, after_block, reference)"
        " SELECT d.settlement_id, d.chain, d.address, d.asset, d.amount, d.sender,"
        " (SELECT MIN(t.block_number) - 1 FROM payment_transfers t"
        " WHERE t.settlement_id = d.settlement_id), NULL"
        " FROM deposits d"
    )
    with op.batch_alter_table("deposits") as batch:
        batch.drop_column("sender")
        batch.drop_column("amount")
