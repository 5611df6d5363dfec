"""Which transfers of one block may pay which watched payments (pure).

A native transfer is a top-level tx to a watched recipient with value > 0 and receipt
status 1 (a reverted tx moved nothing); a token transfer is a ``Transfer`` log of a watched
(token, recipient) pair, already checked to belong to this block's hash. A payment is a
candidate only for transfers in blocks above its ``after_block`` (transfers before its
registration do not count) and from its ``from`` when it has one. Which candidate gets the
transfer is decided in the block's transaction (:mod:`watcher.engine.payments`), where the
amounts paid so far are read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from chains.logs import TransferLog
from chains.models import Block, BlockTx
from guard.payment import NATIVE
from watcher.store.payment_records import NewTransfer, PaymentWatch

Lookup = Callable[[str, str], list[PaymentWatch]]
"""(asset, recipient) → watched payments, oldest first."""


@dataclass(frozen=True)
class Candidate:
    """One transfer of the block and the payments it may count for (oldest first)."""

    transfer: NewTransfer
    """The transfer, with ``settlement_id`` left empty until it is given to one."""
    payments: tuple[str, ...]
    """Settlement ids it may count for."""


def native_txs(block: Block, lookup: Lookup) -> list[tuple[int, BlockTx]]:
    """(tx index, tx) of the block's value transfers to a watched native recipient."""
    return [
        (i, tx)
        for i, tx in enumerate(block.txs)
        if tx.to is not None and tx.value > 0 and lookup(NATIVE, tx.to)
    ]


def _eligible(watches: Sequence[PaymentWatch], number: int, sender: str) -> tuple[str, ...]:
    return tuple(
        w.settlement_id
        for w in watches
        if (w.after_block is None or number > w.after_block)
        and (w.sender is None or w.sender == sender)
    )


def candidates(
    block: Block,
    lookup: Lookup,
    statuses: Mapping[str, int],
    logs: Sequence[TransferLog],
) -> list[Candidate]:
    """Every transfer of ``block`` some watched payment may count, in chain order.

    ``statuses``: receipt status by tx hash of the native candidates (a tx missing there is
    not counted); ``logs``: the ``Transfer`` logs of this block's hash."""
    head = block.header
    out: list[Candidate] = []
    for index, tx in native_txs(block, lookup):
        assert tx.to is not None
        if statuses.get(tx.hash) != 1:
            continue
        ids = _eligible(lookup(NATIVE, tx.to), head.number, tx.sender)
        if ids:
            out.append(
                Candidate(block_transfer(block, tx.hash, index, None, tx.sender, tx.value), ids)
            )
    for log in sorted(logs, key=lambda entry: entry.log_index):
        ids = _eligible(lookup(log.token, log.to), head.number, log.sender)
        if ids and log.value > 0:
            transfer = block_transfer(
                block, log.tx_hash, log.tx_index, log.log_index, log.sender, log.value
            )
            out.append(Candidate(transfer, ids))
    return out


def block_transfer(
    block: Block,
    tx_hash: str,
    tx_index: int,
    log_index: int | None,
    sender: str,
    value: int,
    settlement_id: str = "",
) -> NewTransfer:
    """A transfer of ``block``, given to ``settlement_id`` (empty: to no settlement yet)."""
    return NewTransfer(
        settlement_id=settlement_id,
        tx_hash=tx_hash,
        block_number=block.header.number,
        block_hash=block.header.hash,
        tx_index=tx_index,
        log_index=log_index,
        sender=sender,
        value=str(value),
    )
