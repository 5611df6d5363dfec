"""A stored payment's terms as the guard takes them: its spec, its counted transfers and the
chain position under its own rule (whether a finality gate holds it back is
:func:`watcher.engine.settle.gate_hold`, as for a tx). Shared by the one-by-one decisions of
payments and deposits (:mod:`watcher.engine.payments_settle`) and the batch of a block's
final deposits (:mod:`watcher.engine.deposits_final`).
"""

from __future__ import annotations

from guard.payment import PaymentSpec, RulePosition, Transfer
from watcher.engine.observe import ChainPosition
from watcher.store.payment_records import PaymentSpecRecord, TransferRecord
from watcher.store.refs import DepositRef


def spec_of(rec: PaymentSpecRecord) -> PaymentSpec:
    """The guard's spec of a stored one."""
    return PaymentSpec(rec.to_address, rec.asset, int(rec.amount), rec.sender)


def transfer_of(rec: TransferRecord) -> Transfer:
    """The guard's transfer of a stored one."""
    return Transfer(
        rec.tx_hash,
        rec.block_number,
        rec.block_hash,
        rec.tx_index,
        rec.log_index,
        rec.sender,
        int(rec.value),
    )


def rule_position(rec: DepositRef, pos: ChainPosition) -> RulePosition:
    """The chain position under the settlement's own rule and depth."""
    return RulePosition(
        rec.finality_mode,
        rec.required_confirmations,
        pos.head_number,
        pos.head_hash,
        pos.finalized_number,
        pos.safe_number,
    )
