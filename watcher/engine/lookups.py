"""Watched txs looked up by hash: new ones at once, still-unseen ones within a budget.

A lookup records a pending tx's sender, nonce and signed bytes (a replacement is provable
only then) and an inclusion in a block already processed (decided at once: it may be deep
enough already). After a rebase (a reorg that replaced the whole window) every watched tx
not included for us is asked again, receipts too: the new branch below the window is never
scanned. The calls themselves are in :mod:`watcher.engine.probes`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chains.block_checks import check_senders
from chains.models import BlockHeader, TxInfo
from chains.quorum import Anchor, GateResult
from chains.tracker import HeaderWindow
from guard.types import Address, TxHash
from watcher.engine.apply import decide_records
from watcher.engine.fetch import ChainSource
from watcher.engine.memory import ChainMemory
from watcher.engine.probes import (
    held_tx_objects,
    located_info,
    lookup,
    per_hash,
    receipts_by_block,
)
from watcher.engine.rules import ChainRules, Tally
from watcher.engine.tags import ChainTags, fetch_tags, tags_stale
from watcher.store.block_txn import BlockTxn
from watcher.store.records import SettlementRecord


@dataclass
class Answers:
    """What the node said about the txs looked up."""

    infos: list[Any]
    """TxInfo (or None) per tx asked, in order."""
    included: list[tuple[SettlementRecord, Any]]
    """(settlement, TxInfo) of those the node shows in a block (or with a receipt)."""
    receipts: list[Any]
    """The receipt (or None) of each of ``included``."""
    raws: dict[str, str | None]
    """Signed bytes of the pending ones, by settlement id."""


@dataclass(frozen=True)
class LookupOutcome:
    """What one committed look-up transaction did."""

    looked_up: int
    """Settlements looked up."""
    records: tuple[SettlementRecord, ...] = ()
    """Their records as now stored (the watch index follows them)."""
    confirmed_blocks: tuple[int, ...] = ()
    """Inclusion blocks of those that became FINALITY_CONFIRMED."""
    tags: ChainTags | None = None
    """The chain's tags, when the look-up read them (memory's were stale)."""


NOTHING_LOOKED_UP = LookupOutcome(0)


class TxLookups:
    """The by-hash part of a chain's engine: which txs to ask, the node's answers, and the
    transaction that records them. It keeps only the re-probe budget between polls."""

    def __init__(
        self,
        source: ChainSource,
        fence_of: Callable[[str], tuple[str, int] | None],
        probe_batch: int = 1000,
        reprobe_per_minute: int = 6,
    ) -> None:
        self.source = source
        self.name = source.name
        self.store = source.store
        self.client = source.client
        self.facts = source.facts
        self.gate = source.gate
        self.fence_of = fence_of
        self.probe_batch = probe_batch
        self.reprobe_per_minute = reprobe_per_minute
        self.reprobe_tokens = 0.0
        """Still-unseen txs that may be asked again (refilled with time)."""
        self.reprobe_at = 0
        """When the tokens were last refilled (ms; 0: never)."""

    def probe(
        self, memory: ChainMemory, rules: ChainRules, now: int, limit: int, max_batch: int | None
    ) -> LookupOutcome:
        """Look up watched txs by hash: all new ones, and a budget of still-unseen ones
        (at most ``limit`` in all)."""
        elapsed_min = (now - self.reprobe_at) / 60_000 if self.reprobe_at else 0.0
        self.reprobe_at = now
        self.reprobe_tokens = min(
            float(self.reprobe_per_minute),
            self.reprobe_tokens + elapsed_min * self.reprobe_per_minute,
        )
        due = self.store.due_probes(self.name, now, min(self.probe_batch, limit))
        fresh = [r for r in due if r.probe_count == 0]
        budget = int(self.reprobe_tokens)
        again = [r for r in due if r.probe_count > 0][:budget]
        self.reprobe_tokens -= len(again)
        return self.look_up(memory, rules, fresh + again, now, max_batch=max_batch)

    def recheck_after_rebase(
        self, memory: ChainMemory, rules: ChainRules, now: int
    ) -> LookupOutcome:
        """After a reorg that replaced the whole window (a rebase), look every watched tx
        not included for us up by hash once: the new branch below the window is never
        scanned, and a tx may have been (re-)included there."""
        todo = self.store.unanchored_watching(self.name)
        return self.look_up(memory, rules, todo, now, by_receipt=True)

    def look_up(
        self,
        memory: ChainMemory,
        rules: ChainRules,
        todo: list[SettlementRecord],
        now: int,
        by_receipt: bool = False,
        max_batch: int | None = None,
    ) -> LookupOutcome:
        """Look ``todo`` up by hash (batched): record sender and nonce, and inclusions in
        blocks already processed (then decide them at once). ``by_receipt``: ask every tx's
        receipt too, not only of those the node shows in a block (after a reorg a node may
        still show a re-included tx as pending, as anvil does). Memory is not touched: the
        caller moves it from the outcome."""
        if not todo:
            return NOTHING_LOOKED_UP
        head = memory.window.head
        answers = self._answers(todo, by_receipt, max_batch, memory.window)
        # Included where we cannot judge it yet (no head before the first block is stored, or
        # no receipt yet at a height already processed): leave it untouched so the next poll
        # looks it up again. Recording its sender would end its probing for good, and block
        # scanning will never revisit a block at or below the head.
        deferred = {
            rec.settlement_id
            for (rec, info), receipt in zip(answers.included, answers.receipts, strict=True)
            if head is None or (receipt is None and (info.block_number or 0) <= head.number)
        }
        approval = self._probe_approval(answers, deferred, head)
        tags = self._tags_if_stale(memory, rules, answers, deferred, head)
        tally = Tally()
        with self.store.block_txn(self.name, now, self.fence_of(self.name)) as txn:
            _note_senders(txn, todo, answers, deferred, now)
            found = _inclusions(txn, memory, answers, deferred, head)
            pos = memory.position(tags)
            if found and pos is not None:
                # Included in a block processed before registration: decide now (it may
                # already be deep enough), not only when the next block arrives.
                deciding = rules.deciding(approval or memory.approval)
                decide_records(txn, txn.by_ids(found), pos, now, deciding, tally)
                rules.plan.on_progress(txn, pos.head_number, pos.head_hash, set(found))
            # Read back only what the node answered for: the others' writes (the next probe
            # time) change nothing the index holds, and only this chain's engine writes its
            # settlements, so the records read for the probe still stand for them.
            answered = {r.settlement_id for r, i in zip(todo, answers.infos, strict=True) if i}
            changed = txn.by_ids([r.settlement_id for r in todo if r.settlement_id in answered])
        kept = [r for r in todo if r.settlement_id not in answered]
        return LookupOutcome(len(todo), (*changed, *kept), tuple(tally.confirmed), tags)

    def _tags_if_stale(
        self,
        memory: ChainMemory,
        rules: ChainRules,
        answers: Answers,
        deferred: set[str],
        head: BlockHeader | None,
    ) -> ChainTags | None:
        """The chain's tags read now (before the transaction, as for a block) when the
        look-up found inclusions to decide and memory's tags were not read at the head
        (:func:`~watcher.engine.tags.tags_stale`); None: memory's stand."""
        mode = rules.config.resolved_finality
        if head is None or not tags_stale(memory.tags, mode, head.number):
            return None
        if all(rec.settlement_id in deferred for rec, _ in answers.included):
            return None
        return fetch_tags(self.client, self.gate, mode, True, head.number, memory.tags)

    def _answers(
        self,
        todo: list[SettlementRecord],
        by_receipt: bool,
        max_batch: int | None,
        window: HeaderWindow,
    ) -> Answers:
        """Ask the node about ``todo``: one call per tx hash at most (its settlements share
        it; none for a tx in a block ``window`` holds), one per block for receipts (probes.py)
        at or below its head (:func:`_ahead`); with ``by_receipt`` every receipt and raw tx."""
        hashes = [r.tx_hash for r in todo]
        rebuilt: dict[str, str | None] = {}
        client = self.client
        infos = (
            per_hash(client.transactions, hashes)
            if by_receipt
            else self._infos(todo, rebuilt, max_batch, window)
        )
        every = per_hash(client.receipts, hashes) if by_receipt else [None] * len(todo)
        hits = [
            (r, i, receipt)
            for r, i, receipt in zip(todo, infos, every, strict=True)
            if i is not None and (i.block_number is not None or receipt is not None)
        ]
        included = [(r, i) for r, i, _ in hits]
        ahead = _ahead(hits, rebuilt, window.head)
        # Every receipt is checked against its block's roots (chains/block_checks.py): the
        # node's word alone (``eth_getTransactionReceipt``) only says which block to check.
        blocks = [
            None if r.settlement_id in ahead else receipt.block_hash if receipt else i.block_hash
            for r, i, receipt in hits
        ]
        by_hash = receipts_by_block(
            self.client,
            self.facts,
            [(r.tx_hash, b) for (r, _), b in zip(included, blocks, strict=True) if b is not None],
        )
        receipts = [
            None if r.settlement_id in ahead else by_hash.get(r.tx_hash) for r, _ in included
        ]
        said: dict[str, list[tuple[str, str, int]]] = {}
        for (r, i), receipt in zip(included, receipts, strict=True):
            if receipt is not None:  # in a checked block: who sent it is checked there too
                said.setdefault(receipt.block_hash, []).append((r.tx_hash, i.sender, i.nonce))
        for block_hash, txs in said.items():
            check_senders(client, self.facts, block_hash, txs)
        included_ids = {r.settlement_id for r, _ in included}
        # The signed bytes of a pending tx prove its sender and nonce later, after a
        # replacement has made it vanish from every node.
        pending = [
            r
            for r, i in zip(todo, infos, strict=True)
            if i and i.block_number is None and r.settlement_id not in included_ids
        ]
        if not by_receipt:
            raws = {r.settlement_id: rebuilt.get(r.settlement_id) for r in pending}
        else:
            fetched = per_hash(client.raw_transactions, [r.tx_hash for r in pending])
            raws = dict(zip((r.settlement_id for r in pending), fetched, strict=True))
        return Answers(infos, included, receipts, raws)

    def _probe_approval(
        self, answers: Answers, deferred: set[str], head: BlockHeader | None
    ) -> GateResult | None:
        """The gate's answer about txs a probe found in blocks already processed (asked
        before the transaction, as for a block): such a settlement may be deep enough at
        once, and the gate asked at the last block did not know it. Without this it would
        wait for the next block, for ever on a chain that went quiet."""
        if self.gate.trivial or head is None:
            return None
        anchors = [
            Anchor(
                settlement_id=rec.settlement_id,
                block_number=receipt.block_number,
                block_hash=receipt.block_hash,
                confirm_height=receipt.block_number + rec.required_confirmations - 1,
            )
            for (rec, _), receipt in zip(answers.included, answers.receipts, strict=True)
            if rec.settlement_id not in deferred
            and receipt is not None
            and receipt.block_number <= head.number
        ]
        return self.gate.approve(anchors, head) if anchors else None

    def _infos(
        self,
        todo: list[SettlementRecord],
        rebuilt: dict[str, str | None],
        max_batch: int | None,
        window: HeaderWindow,
    ) -> list[Any]:
        """What the node says of each of ``todo`` (TxInfo or None), filling ``rebuilt`` with
        the signed bytes of pending ones. A registration that gave sender and nonce is not
        asked: it is found in the blocks the tracker holds, or left to block scanning; nor
        one whose tx is in a block ``window`` holds (its tx object is in hand)."""
        unknown = [r for r in todo if r.sender is None or r.nonce is None]
        peers = self._peers(unknown) if unknown else {}
        asked = [r for r in unknown if r.settlement_id not in peers]
        hashes = [r.tx_hash for r in asked]
        held = held_tx_objects(self.facts, window, hashes)
        looked = lookup(self.client, hashes, max_batch, held)
        answers = dict(zip((r.settlement_id for r in asked), looked, strict=True))
        infos: list[Any] = []
        for r in todo:
            if r.settlement_id in answers:
                info, signed = answers[r.settlement_id]
                rebuilt[r.settlement_id] = signed
            elif r.settlement_id in peers:
                info, rebuilt[r.settlement_id] = peers[r.settlement_id]
            else:
                assert r.sender is not None and r.nonce is not None
                info = located_info(self.facts, r.tx_hash, r.sender, r.nonce)
            infos.append(info)
        return infos

    def _peers(self, todo: list[SettlementRecord]) -> dict[str, tuple[TxInfo, str | None]]:
        """(TxInfo, signed bytes) for those of ``todo`` whose tx another caller's settlement
        already holds the signed bytes of: no lookup. A caller's bare word about
        sender and nonce is never passed on to another caller; and only where the facts are
        complete without a call: the tx still pending for the peer (block scanning finds it
        for both), or in a block the tracker holds. Otherwise the node is asked."""
        seen = self.store.proven_senders(self.name, [r.tx_hash for r in todo])
        out: dict[str, tuple[TxInfo, str | None]] = {}
        for r in todo:
            peer = seen.get(r.tx_hash)
            if peer is None or peer.sender is None or peer.nonce is None:
                continue
            info = located_info(self.facts, r.tx_hash, peer.sender, peer.nonce)
            if info is None and peer.block_number is None and peer.replaced_by is None:
                info = TxInfo(TxHash(r.tx_hash), Address(peer.sender), peer.nonce, None, None)
            if info is not None:
                out[r.settlement_id] = (info, peer.raw_tx)
        return out


def _ahead(
    hits: list[tuple[SettlementRecord, Any, Any]],
    proven: dict[str, str | None],
    head: BlockHeader | None,
) -> set[str]:
    """The ids of ``hits`` (record, TxInfo, receipt or None) the node places in a block above
    the processed ``head`` whose sender and nonce their own signed bytes proved (``proven``:
    the bytes the look-up rebuilt and checked, by settlement id). Their block's receipts are
    not fetched now: block scanning reads that block and checks its receipts there (a
    catch-up's registrations fetched each block's receipts twice), and nothing else the
    receipt would check is used before (the inclusion is recorded by the scan)."""
    if head is None:
        return set()
    return {
        r.settlement_id
        for r, i, receipt in hits
        if receipt is None
        and i.block_number is not None
        and i.block_number > head.number
        and proven.get(r.settlement_id) is not None
    }


def _note_senders(
    txn: BlockTxn,
    todo: list[SettlementRecord],
    answers: Answers,
    deferred: set[str],
    now: int,
) -> None:
    """Record each answered tx's sender, nonce and signed bytes; schedule its next
    probe with a growing backoff. Two statements in all, each executed for every row
    (a statement per row was a third of the poller's time under batch registration)."""
    senders: list[tuple[SettlementRecord, str, int, str | None]] = []
    probes: list[tuple[SettlementRecord, int]] = []
    for rec, info in zip(todo, answers.infos, strict=True):
        if rec.settlement_id in deferred:
            continue
        if info is not None:
            senders.append((rec, info.sender, info.nonce, answers.raws.get(rec.settlement_id)))
        backoff = min(300_000, 5_000 * 2 ** min(rec.probe_count, 6))
        probes.append((rec, now + backoff))
    txn.set_senders(senders)
    txn.set_probes(probes)


def _inclusions(
    txn: BlockTxn,
    memory: ChainMemory,
    answers: Answers,
    deferred: set[str],
    head: BlockHeader | None,
) -> list[str]:
    """Record inclusions in blocks already processed here; returns their ids."""
    found: list[str] = []
    for (rec, info), receipt in zip(answers.included, answers.receipts, strict=True):
        if rec.settlement_id in deferred:
            continue
        if receipt is None or head is None or receipt.block_number > head.number:
            continue  # not yet processed here: block scanning will find it
        held = memory.window.get(receipt.block_number)
        if held is not None and held.hash != receipt.block_hash:
            continue  # the node's receipt is on another branch: not included for us
        txn.set_inclusion(
            rec,
            receipt.block_number,
            receipt.block_hash,
            receipt.tx_index,
            receipt.status,
            info.sender,
            info.nonce,
        )
        found.append(rec.settlement_id)
    return found
