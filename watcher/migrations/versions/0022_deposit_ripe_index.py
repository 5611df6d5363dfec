"""A deposit's block on its settlement row, so that a block finds the deposits it may make
final by index ranges, not by walking every deposit awaiting finality.

``transfer_block``: the lowest block of a deposit's counted transfers (NULL for every other
kind); a deposit whose rule has a depth basis also gets ``confirm_height`` (that block +
its confirmations - 1), which the tx rows already have. The reads of the ripe deposits
take ``confirm_height <= head`` (``ix_settlements_confirm``) and ``transfer_block <=`` the
``finalized``/``safe`` height (``ix_settlements_transfer_block``, new, partial), both among
watched rows only. Before, on a chain whose rule is the ``finalized`` tag (a deposit waits
64 blocks on Ethereum), that read walked every awaiting deposit at every block: 121-206 ms
of a block with 64,000 of them (bench/README.md). Watched deposits get both from their
counted transfers; the others need neither. The reads of the due txs under a finalized
height walked the same rows: two more partial indexes, of the watched rows by their
inclusion and replacing blocks, give them ranges too; and a third, of the watched rows
that are not address watches, the poll's read of those registered since its last look.

Revision ID: 0022_deposit_ripe_index
Revises: 0021_deposit_specs
"""

import sqlalchemy as sa
from alembic import op

revision = "0022_deposit_ripe_index"
down_revision = "0021_deposit_specs"
branch_labels = None
depends_on = None

WATCHED_ANCHORS = {
    "ix_settlements_watched_block": "block_number",
    "ix_settlements_watched_replaced": "replaced_block_number",
}
"""The watched txs by their inclusion and replacing blocks: what a block under a finalized
height may make final, found by a range (the indexes of 0020 on those columns hold every
included tx ever, watched or not)."""

WATCHED_TXS = "watching AND kind NOT IN ('evm_payment', 'evm_deposit')"
"""The watched rows that are not address watches: the poll reads those registered since its
last look by this index (``ix_settlements_watched_txs``), in these words."""

DEPTH_MODES = "('depth', 'depth_or_finalized', 'depth_and_finalized')"
"""The rules with a depth basis (guard/finality_rule.py BASES_OF_MODE), as of this revision."""


def upgrade() -> None:
    op.add_column("settlements", sa.Column("transfer_block", sa.BigInteger))
    where = sa.text("transfer_block IS NOT NULL")
    op.create_index(
        "ix_settlements_transfer_block",
        "settlements",
        ["chain", "watching", "transfer_block"],
        sqlite_where=where,
        postgresql_where=where,
    )
    for name, keyed in WATCHED_ANCHORS.items():
        where = sa.text(f"{keyed} IS NOT NULL")
        op.create_index(
            name,
            "settlements",
            ["chain", "watching", keyed],
            sqlite_where=where,
            postgresql_where=where,
        )
    where = sa.text(WATCHED_TXS)
    op.create_index(
        "ix_settlements_watched_txs",
        "settlements",
        ["chain", "seq"],
        sqlite_where=where,
        postgresql_where=where,
    )
    deposit = "kind = 'evm_deposit' AND watching"
    op.execute(
        "UPDATE settlements SET transfer_block = (SELECT MIN(t.block_number)"
        " FROM payment_transfers t WHERE t.settlement_id = settlements.settlement_id)"
        f" WHERE {deposit}"
    )
    op.execute(
        "UPDATE settlements SET confirm_height = transfer_block + required_confirmations - 1"
        f" WHERE {deposit} AND transfer_block IS NOT NULL AND finality_mode IN {DEPTH_MODES}"
    )


def downgrade() -> None:
    op.execute("UPDATE settlements SET confirm_height = NULL WHERE kind = 'evm_deposit'")
    op.drop_index("ix_settlements_watched_txs", "settlements")
    for name in WATCHED_ANCHORS:
        op.drop_index(name, "settlements")
    op.drop_index("ix_settlements_transfer_block", "settlements")
    with op.batch_alter_table("settlements") as batch:
        batch.drop_column("transfer_block")
