"""Which transfers of one block are deposits to watched addresses (pure).

A native deposit is a successful top-level tx with value > 0 to a watched address (its
receipt status is what says it succeeded); a token deposit is a ``Transfer`` log of a
watched token to a watched address, already checked to belong to this block's hash. Each
subscription watching the address (and the asset) gets its own deposit; a transfer in a
block at or below the address's ``after_block`` (the head when it was added) is not one.

A deposit's identity is (subscription, tx, asset, address, ordinal): the ordinal counts
the tx's earlier transfers of the same asset to the same address, so the identity does not
change when a reorg includes the tx again at another height or log index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from chains.logs import TransferLog
from chains.models import Block, BlockTx
from guard.deposit import deposit_id
from guard.payment import NATIVE
from watcher.engine.deposits_index import SubscriptionIndex, WatchedBy
from watcher.engine.payments_scan import block_transfer
from watcher.store.deposit_records import NewDeposit
from watcher.store.payment_records import NewTransfer


@dataclass(frozen=True)
class DepositCandidate:
    """One transfer of the block, as a deposit of one subscription."""

    deposit: NewDeposit
    """Its identity (stored once)."""
    transfer: NewTransfer
    """The transfer counted for it in this block."""


def native_deposit_txs(block: Block, index: SubscriptionIndex) -> list[tuple[int, BlockTx]]:
    """(tx index, tx) of the block's value transfers to a watched native address (their
    receipts say whether they succeeded)."""
    if not index.active:
        return []
    return [
        (i, tx)
        for i, tx in enumerate(block.txs)
        if tx.to is not None and tx.value > 0 and index.watched(tx.to, NATIVE)
    ]


def deposit_candidates(
    block: Block,
    index: SubscriptionIndex,
    statuses: Mapping[str, int],
    logs: Sequence[TransferLog],
) -> list[DepositCandidate]:
    """Every deposit ``block`` holds, in chain order (``statuses``: receipt status by tx
    hash of the native candidates; ``logs``: the ``Transfer`` logs of this block's hash)."""
    number = block.header.number
    out: list[DepositCandidate] = []
    for i, tx in native_deposit_txs(block, index):
        assert tx.to is not None
        if statuses.get(tx.hash) != 1:
            continue
        for w in _counted(index.watching(tx.to, NATIVE), number):
            deposit = _deposit(w, tx.hash, NATIVE, tx.to, 0)
            transfer = block_transfer(
                block, tx.hash, i, None, tx.sender, tx.value, deposit.settlement_id
            )
            out.append(DepositCandidate(deposit, transfer))
    seen: dict[tuple[str, str, str], int] = {}
    for log in sorted(logs, key=lambda entry: entry.log_index):
        if log.value <= 0:
            continue
        key = (log.tx_hash, log.token, log.to)
        ordinal = seen.get(key, 0)
        seen[key] = ordinal + 1
        for w in _counted(index.watching(log.to, log.token), number):
            deposit = _deposit(w, log.tx_hash, log.token, log.to, ordinal)
            transfer = block_transfer(
                block,
                log.tx_hash,
                log.tx_index,
                log.log_index,
                log.sender,
                log.value,
                deposit.settlement_id,
            )
            out.append(DepositCandidate(deposit, transfer))
    return out


def _counted(watches: list[WatchedBy], number: int) -> list[WatchedBy]:
    return [w for w in watches if w.after_block is None or number > w.after_block]


def _deposit(w: WatchedBy, tx_hash: str, asset: str, to: str, ordinal: int) -> NewDeposit:
    """The deposit of ``w``'s subscription a transfer makes (its id: :func:`deposit_id`)."""
    sid = deposit_id(w.subscription_id, tx_hash, asset, to, ordinal)
    return NewDeposit(sid, w.subscription_id, tx_hash, ordinal, to, asset)
