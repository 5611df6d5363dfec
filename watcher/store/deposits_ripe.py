"""The deposits that may become final at a block, read narrowly (inside its transaction).

A block of 1,000 deposits makes the 1,000 of a few blocks before it final. Reading them as
whole settlement records (every column, the stored decision's JSON parsed, the spec and the
transfer read by two more statements) was a sixth of such a block's CPU, and none of it was
needed: a deposit awaiting finality before its deadline is decided from its registration
instant, timeout, rule, spec and one transfer
(:func:`watcher.engine.deposits_final.ripe_outcomes`), its stored decision being a wait
whatever else it says. One statement reads exactly that, on the driver's cursor
(:mod:`watcher.store.driver_sql`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sqlalchemy import CompoundSelect, bindparam, select
from sqlalchemy.sql import ClauseElement

from guard.payment import DEPOSIT_KIND
from guard.settlement import Verdict
from watcher.store import schema as s
from watcher.store.block_txn import BlockTxn
from watcher.store.conditions import deposit_key_ranges, rule_reached, watched_in
from watcher.store.driver_sql import statement
from watcher.store.payment_records import PaymentSpecRecord, TransferRecord
from watcher.store.records import from_values


@dataclass(frozen=True)
class RipeDeposit:
    """A watched deposit awaiting finality, before its deadline, with a transfer whose block
    may be final: what deciding it needs, and what its stored outcome names."""

    seq: int
    settlement_id: str
    initiated_at: int
    timeout_ms: int
    deadline: int
    finality_mode: str
    required_confirmations: int
    commit_url: str | None
    subscription_id: str
    spec: PaymentSpecRecord
    transfers: tuple[TransferRecord, ...]
    """Every transfer counted for it (one, unless something unusual happened: then it is
    decided the whole way)."""
    chain: str

    @property
    def kind(self) -> str:
        """A deposit."""
        return DEPOSIT_KIND

    @property
    def verdict(self) -> str:
        """Awaiting finality (what was read)."""
        return Verdict.AWAITING_FINALITY.value

    @property
    def terminal_at(self) -> int | None:
        """Awaiting: not terminal yet."""
        return None


def ripe_deposits(
    txn: BlockTxn, head: int, finalized: int | None = None, safe: int | None = None
) -> list[RipeDeposit]:
    """The chain's watched deposits awaiting finality whose deadline is after ``txn.now``
    and one of whose transfers is in a block final under the deposit's rule at ``head`` and
    the ``finalized``/``safe`` heights (:func:`~watcher.store.conditions.rule_reached`), in
    registration order: the other half of
    :func:`watcher.store.payments_store.payments_due` (``plain_deposits=False``)."""
    heights = (finalized is not None, safe is not None)
    values: dict[str, object] = {"q_chain": txn.chain, "q_now": txn.now, "q_head": head}
    if finalized is not None:
        values["q_finalized"] = finalized
    if safe is not None:
        values["q_safe"] = safe
    query = statement(txn.conn, ("ripe_deposits", heights), lambda: _query(*heights))
    cursor = query.run(txn.conn, values)
    try:
        rows = cursor.fetchall()
    finally:
        cursor.close()
    out: list[RipeDeposit] = []
    chain = txn.chain
    # Records built from their values (records.from_values): three frozen dataclasses a row
    # through their __init__ were a third of this read.
    for row in rows:
        sid = row[1]
        transfer = from_values(TransferRecord, row[13:])
        if out and out[-1].settlement_id == sid:  # a second transfer: rows by (seq, transfer)
            out[-1] = replace(out[-1], transfers=(*out[-1].transfers, transfer))
            continue
        spec = from_values(PaymentSpecRecord, (sid, chain, *row[8:12], None, None))
        out.append(from_values(RipeDeposit, (*row[:8], row[12], spec, (transfer,), chain)))
    return out


def _query(finalized: bool, safe: bool) -> ClauseElement:
    t, x, d = s.settlements, s.payment_transfers, s.deposits
    own = x.c.settlement_id == t.c.settlement_id
    ripe = rule_reached(
        x.c.block_number,
        t.c.required_confirmations,
        t.c.finality_mode,
        bindparam("q_head"),
        bindparam("q_finalized") if finalized else None,
        bindparam("q_safe") if safe else None,
    )
    mine = x.alias("mine")
    return (
        select(
            t.c.seq,
            t.c.settlement_id,
            t.c.initiated_at,
            t.c.timeout_ms,
            t.c.deadline,
            t.c.finality_mode,
            t.c.required_confirmations,
            t.c.commit_url,
            d.c.address,
            d.c.asset,
            d.c.amount,
            d.c.sender,
            d.c.subscription_id,
            *(mine.c[name] for name in _TRANSFER_COLUMNS),
        )
        .select_from(
            t.join(d, d.c.settlement_id == t.c.settlement_id).join(
                mine, mine.c.settlement_id == t.c.settlement_id
            )
        )
        .where(
            t.c.seq.in_(_candidates(finalized, safe)),
            t.c.kind == DEPOSIT_KIND,
            t.c.verdict == Verdict.AWAITING_FINALITY.value,
            t.c.deadline > bindparam("q_now"),
            select(x.c.id).where(own, ripe).exists(),
        )
        .order_by(t.c.seq, mine.c.block_number, mine.c.tx_index, mine.c.log_index, mine.c.id)
    )


def _candidates(finalized: bool, safe: bool) -> CompoundSelect[tuple[int]]:
    """The chain's watched rows whose block keys say their rule may be reached: deep enough
    (``confirm_height``, kept for a deposit whose rule has a depth basis) or at or below a
    tag (``transfer_block``), each through an index of its own, so that a block reads the
    deposits it may make final, not every one awaiting (on Ethereum, 64 blocks of them).
    A superset: the keys are never above a deposit's counted transfers
    (:func:`watcher.store.deposits_store.lower_deposit_blocks`), and the query asks the
    exact rule of those transfers (:func:`~watcher.store.conditions.watched_in`)."""
    ranges = deposit_key_ranges(
        bindparam("q_head"),
        bindparam("q_finalized") if finalized else None,
        bindparam("q_safe") if safe else None,
    )
    return watched_in(bindparam("q_chain"), ranges)


_TRANSFER_COLUMNS: Sequence[str] = (
    "id",
    "settlement_id",
    "chain",
    "tx_hash",
    "block_number",
    "block_hash",
    "tx_index",
    "log_index",
    "sender",
    "value",
)
""":class:`TransferRecord`'s fields, in order."""
