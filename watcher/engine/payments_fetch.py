"""What a poll asks the node for the payments and deposits it counts (before any
transaction opens).

Per poll, and only while a token payment (or a token deposit) is watched,
:func:`fetch_transfer_logs` asks for the ``Transfer`` logs of every watched (token,
recipient) pair over the poll's new blocks in **one** ``eth_getLogs`` (:mod:`chains.logs`);
a log is kept only if it belongs to the block hash we process at its height (a log of
another branch means the node moved: the poll is retried, nothing was committed). Native
transfers come from the full blocks the tracker already fetched; their receipts (status)
are fetched, by :func:`block_transfers`, only for a block that holds a value transfer to a
watched recipient.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from chains.block_checks import checked_receipts
from chains.block_facts import BlockFacts
from chains.errors import ChainInconsistent, RpcErrorResponse
from chains.logs import TransferLog, transfer_logs
from chains.models import Block
from chains.rpc import RpcClient
from chains.tracker import Reorg
from watcher.engine.deposits_index import SubscriptionIndex
from watcher.engine.deposits_scan import DepositCandidate, deposit_candidates, native_deposit_txs
from watcher.engine.payments_index import PaymentIndex
from watcher.engine.payments_scan import Candidate, Lookup, candidates, native_txs
from watcher.store.payment_records import PaymentWatch
from watcher.store.store import Store


@dataclass(frozen=True)
class BlockTransfers:
    """The transfers of one block the engine counts: for payments, and as deposits."""

    payments: list[Candidate]
    """Transfers that may pay a watched payment."""
    deposits: list[DepositCandidate]
    """Transfers to a subscription's watched address (one per subscription)."""


NO_TRANSFERS = BlockTransfers([], [])


@dataclass(frozen=True)
class PollTransfers:
    """What one poll fetched for transfers, shared by its blocks."""

    logs: Mapping[str, list[TransferLog]] = field(default_factory=dict)
    """The ``Transfer`` logs by block hash."""
    reorged: PaymentIndex = field(default_factory=PaymentIndex)
    """After this poll's reorg: the payments whose counted transfers it removes (confirmed
    ones too: the new branch may include their transfers again)."""


def fetch_transfer_logs(
    chain: str,
    store: Store,
    client: RpcClient,
    watches: tuple[PaymentIndex, SubscriptionIndex],
    blocks: Sequence[Block],
    reorg: Reorg | None = None,
) -> tuple[Sequence[Block], PollTransfers]:
    """The poll's one ``eth_getLogs`` (none without a watched token), kept by block hash;
    returns the blocks to process and what was fetched.

    A node that refuses the range (a provider's cap on blocks or results) is asked for
    the first half, and so on: only the blocks covered are processed in this poll, the
    rest in the next ones. Raises :class:`ChainInconsistent` for a log of another
    branch, the node's error when even one block is refused."""
    payments, subscriptions = watches
    reorged = PaymentIndex()
    if reorg is not None and blocks:
        for watch in store.payments_paid_above(chain, reorg.common_ancestor.number):
            reorged.add(watch)
    tokens = set(payments.tokens) | set(reorged.tokens)
    deposit_tokens = subscriptions.tokens() if subscriptions.active else set()
    if not blocks or not (tokens or deposit_tokens):
        return blocks, PollTransfers(reorged=reorged)
    recipients: AbstractSet[str] = payments.token_recipients() | reorged.token_recipients()
    if deposit_tokens:
        tokens |= deposit_tokens
        watched = subscriptions.addresses()  # kept between polls: not copied
        recipients = recipients | watched if recipients else watched
    while True:
        first, last = blocks[0].header.number, blocks[-1].header.number
        try:
            found = transfer_logs(client, first, last, tokens, recipients)
            break
        except RpcErrorResponse:
            if len(blocks) == 1:
                raise
            blocks = blocks[: len(blocks) // 2]
    return blocks, PollTransfers(_by_block(chain, blocks, found), reorged)


def _by_block(
    chain: str, blocks: Sequence[Block], found: Sequence[TransferLog]
) -> dict[str, list[TransferLog]]:
    """The logs of the blocks processed, by block hash (another branch's: an error)."""
    ours: dict[int, str] = {b.header.number: b.header.hash for b in blocks}
    logs: dict[str, list[TransferLog]] = {}
    for log in found:
        want = ours.get(log.block_number)
        if want is None:
            continue
        if log.block_hash != want:
            raise ChainInconsistent(
                f"{chain}: eth_getLogs answered for block {log.block_number} "
                f"{log.block_hash}, but the block processed there is {want} (the node "
                "moved to another branch): retrying"
            )
        logs.setdefault(want, []).append(log)
    return logs


def block_transfers(
    chain: str,
    client: RpcClient,
    facts: BlockFacts,
    watches: tuple[PaymentIndex, SubscriptionIndex],
    block: Block | None,
    fetched: PollTransfers,
) -> BlockTransfers:
    """The block's transfers that may pay a watched payment, and its deposits (receipts
    fetched only for a block with a native value transfer to a watched address)."""
    payments, subscriptions = watches
    extra = fetched.reorged
    paying = bool(payments.by_id or extra.by_id)
    if block is None or not (paying or subscriptions.active):
        return NO_TRANSFERS
    lookup = _lookup(payments, extra)
    native = native_txs(block, lookup) if paying else []
    native += native_deposit_txs(block, subscriptions)
    statuses: dict[str, int] = {}
    if native:
        wanted = list(dict.fromkeys(tx.hash for _, tx in native))
        receipts = checked_receipts(client, facts, block.header.hash, wanted)
        statuses = {r.tx_hash: r.status for r in receipts}
        missing = [h for h in wanted if h not in statuses]
        if missing:
            raise ChainInconsistent(
                f"{chain}: block {block.header.number} lists {len(missing)} payment "
                f"tx(s) without receipts (first {missing[0]}): retrying"
            )
    logs = fetched.logs.get(block.header.hash, [])
    paid = candidates(block, lookup, statuses, logs) if paying else []
    return BlockTransfers(paid, deposit_candidates(block, subscriptions, statuses, logs))


def _lookup(payments: PaymentIndex, extra: PaymentIndex) -> Lookup:
    """Who a transfer may pay: the watched payments and, in this poll's blocks after a
    reorg, those whose transfers it removed (``extra``: a confirmed one must find its
    transfer re-included on the new branch)."""
    if not extra.by_id:
        return payments.watching

    def both(asset: str, to: str) -> list[PaymentWatch]:
        merged = {w.settlement_id: w for w in payments.watching(asset, to)}
        merged.update((w.settlement_id, w) for w in extra.watching(asset, to))
        return sorted(merged.values(), key=lambda w: w.seq)

    return both
