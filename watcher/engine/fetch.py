"""Everything one block transaction needs from the node and the store, fetched first.

:func:`fetch_block` makes all network calls for one block (its watched txs and
replacements, their receipts checked against the block's roots, its payment and deposit
transfers, the quorum gate's approval) and returns a frozen
:class:`~watcher.engine.values.BlockInput`; only then does the caller open the block's
transaction (:func:`watcher.engine.apply.apply_block`); :func:`fetch_run` does the same
for a catch-up's run of blocks, their receipts in one batch. :func:`deadline_input` is the
input of a transaction with no new block (time passed: timeouts, end of late watch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chains.block_checks import RawReceipts, check_senders, checked_receipts, fetch_receipts_of
from chains.block_facts import BlockFacts
from chains.errors import ChainError
from chains.models import Block, BlockHeader, TxReceipt
from chains.quorum import FinalityGate, GateResult
from chains.rpc import RpcClient
from chains.tracker import Reorg
from watcher.engine.matching import NO_REANCHOR, BlockMatches, match_block, reanchor_of
from watcher.engine.memory import ChainMemory
from watcher.engine.observe import ChainPosition
from watcher.engine.payments_fetch import PollTransfers, block_transfers
from watcher.engine.tags import ChainTags
from watcher.engine.values import NO_MATCHES, BlockInput
from watcher.store.store import Store


class ChainInconsistentReceipts(ChainError):
    """A block lists a watched tx but the node returned no receipt for it: retry the block."""

    def __init__(self, chain: str, number: int, missing: list[str]) -> None:
        super().__init__(
            f"{chain}: block {number} lists {len(missing)} watched tx(s) without receipts "
            f"(first {missing[0]}); treating them as not yet included and retrying"
        )


@dataclass(frozen=True)
class ChainSource:
    """What a chain's engine reads from: the store (reads only), the node's client, the
    facts the client keeps of recent blocks, and the finality gate."""

    name: str
    store: Store
    client: RpcClient
    facts: BlockFacts
    gate: FinalityGate


@dataclass(frozen=True)
class PollView:
    """What one poll fetched once for all its blocks."""

    tags: ChainTags
    """The chain's tags this poll."""
    node_head: BlockHeader
    """The node's ``latest``."""
    transfers: PollTransfers
    """The poll's ``Transfer`` logs and the payments its reorg un-counts."""


def fetch_block(
    source: ChainSource,
    memory: ChainMemory,
    poll: PollView,
    block: Block | None,
    reorg: Reorg | None,
    now: int,
) -> BlockInput:
    """The input of ``block``'s transaction (or of ``reorg``'s, seen without a new
    block) at time ``now``: every call for it made here, none inside the transaction."""
    matches = _matches(source, memory, block, reorg)
    receipts = _receipts(source, block, matches)
    return _input(source, memory, poll, block, reorg, now, matches, receipts)


def fetch_run(
    source: ChainSource,
    memory: ChainMemory,
    poll: PollView,
    blocks: Sequence[Block],
    now: int,
    poll_last: int | None = None,
) -> list[BlockInput]:
    """The inputs of consecutive ``blocks`` (no reorg among them) to be applied in one
    transaction (:func:`watcher.engine.apply.apply_run`): each as :func:`fetch_block` gives
    it with memory as it stands, except that the receipts of every block holding a watched
    tx are asked in one batch (:func:`~chains.block_checks.fetch_receipts_of`), and only
    the blocks the header window keeps after the poll (whose last block is ``poll_last``;
    None: this run's last) carry their compact header. The run stores no header below its
    own window (:func:`~watcher.store.block_txn.put_headers`), and a run the same poll
    continues has the rows of its window replaced by the next run's within the poll: made
    for every run's window, a compact header (a re-hash, when the client did not check the
    header already) was made for a third of a catch-up's blocks, to be deleted a moment
    later. A row stored without one only sends a receipt built meanwhile to the node for
    that header (watcher/receipts/headers.py), as for a header this version cannot
    re-hash."""
    matches = [match_block(b.txs, memory.index) for b in blocks]
    last = poll_last if poll_last is not None else blocks[-1].header.number if blocks else 0
    kept_from = last - memory.window.capacity
    wanted = [
        b.header.hash for b, m in zip(blocks, matches, strict=True) if m.matched or m.replacing
    ]
    fetched = fetch_receipts_of(source.client, wanted)
    return [
        _input(
            source,
            memory,
            poll,
            block,
            None,
            now,
            found,
            _receipts(source, block, found, fetched.get(block.header.hash)),
            compact=block.header.number > kept_from,
        )
        for block, found in zip(blocks, matches, strict=True)
    ]


def _input(
    source: ChainSource,
    memory: ChainMemory,
    poll: PollView,
    block: Block | None,
    reorg: Reorg | None,
    now: int,
    matches: BlockMatches,
    receipts: dict[str, TxReceipt],
    *,
    compact: bool = True,
) -> BlockInput:
    """:func:`fetch_block`'s input once its matches and receipts are known: the block's
    transfers and the gate's answer asked, the tags of the poll. ``compact``: False when
    the header will not be stored (no compact header is made)."""
    head = block.header if block is not None else (reorg.common_ancestor if reorg else None)
    assert head is not None
    watches = (memory.payments, memory.subscriptions)
    transfers = block_transfers(
        source.name, source.client, source.facts, watches, block, poll.transfers
    )
    tags = poll.tags
    finalized = tags.finalized
    covered = tags.covered(finalized)
    approval = _ask_gate(source, memory, head, covered)
    changed = finalized is not None and finalized != memory.stored_finalized
    return BlockInput(
        now=now,
        head=head,
        position=ChainPosition(head.number, head.hash, finalized, tags.untrusted, tags.safe),
        covered=covered,
        approval=approval,
        tags=tags,
        block=block,
        reorg=reorg,
        node_head=poll.node_head,
        new_head=True,
        compact_header=source.facts.header(head.hash) if compact else None,
        store_finalized=finalized if changed else None,
        matches=matches,
        receipts=receipts,
        transfers=transfers,
        subscriptions=dict(memory.subscriptions.records),
        transfers_watched=memory.watching_transfers,
    )


def deadline_input(memory: ChainMemory, now: int) -> BlockInput | None:
    """The input of a transaction with no new block, decided at the last processed head
    with the tags and gate answer of the last block (None before the first block)."""
    pos = memory.position()
    head = memory.window.head
    if pos is None or head is None:
        return None
    return BlockInput(
        now=now,
        head=head,
        position=pos,
        covered=memory.tags.covered(memory.finalized_number),
        approval=memory.approval,
    )


def _matches(
    source: ChainSource, memory: ChainMemory, block: Block | None, reorg: Reorg | None
) -> BlockMatches:
    """The block's watched txs and replacements; after a reorg, also of settlements
    anchored on the replaced blocks (read before the transaction)."""
    if block is None:
        return NO_MATCHES
    reanchor = NO_REANCHOR
    if reorg is not None:
        anchored = source.store.anchored_above(source.name, reorg.common_ancestor.number)
        reanchor = reanchor_of(anchored, memory.index)
    return match_block(block.txs, memory.index, reanchor)


def _receipts(
    source: ChainSource,
    block: Block | None,
    matches: BlockMatches,
    fetched: RawReceipts | None = None,
) -> dict[str, TxReceipt]:
    """Receipts of the block's watched txs, checked against its roots (none fetched
    when it holds none; a block with only a replacing tx is checked the same way: the
    replacement is decided on its txs). ``fetched``: the block's receipts as a batch of
    blocks' already asked (checked all the same)."""
    if block is None or not (matches.matched or matches.replacing):
        return {}
    client, facts = source.client, source.facts
    # Several settlements of one tx (one per caller) share its receipt: asked once.
    wanted: list[str] = list(dict.fromkeys(tx.hash for _, tx in matches.matched))
    checked = checked_receipts(
        client,
        facts,
        block.header.hash,
        wanted or [tx.hash for _, tx in matches.replacing],
        fetched,
        listed=[tx.hash for tx in block.txs],  # a catch-up's block may be out of the facts
    )
    found: dict[str, TxReceipt] = {r.tx_hash: r for r in checked}
    # Who sent them is what inclusions and replacements are matched on: checked too.
    said = {tx.hash: (tx.hash, tx.sender, tx.nonce) for _, tx in matches.matched}
    said.update((tx.hash, (tx.hash, tx.sender, tx.nonce)) for _, tx in matches.replacing)
    check_senders(client, facts, block.header.hash, list(said.values()))
    missing = [h for h in wanted if h not in found]
    if missing:
        raise ChainInconsistentReceipts(source.name, block.header.number, missing)
    return found


def _ask_gate(
    source: ChainSource, memory: ChainMemory, head: BlockHeader, covered: int | None
) -> GateResult | None:
    """Ask the finality gate about the settlements this head could make terminal
    (before the transaction: the gate may call other endpoints). None when trivial."""
    gate = source.gate
    if gate.trivial:
        return None
    anchors = source.store.finality_anchors(source.name, head.number, covered)
    if memory.watching_transfers:  # the blocks of counted transfers (engine/payments.py)
        anchors += source.store.payment_anchors(source.name)
    return gate.approve(anchors, head) if anchors else GateResult(frozenset())
