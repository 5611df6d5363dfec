"""``apply_block`` over a real SQLite store, with scripted block inputs and no node.

Each test builds the :class:`~watcher.engine.values.BlockInput` a poll would have fetched
(headers, matches, receipts, transfers: all pure values here), applies it in the block's
own store transaction, and moves the chain's memory from the outcome, as the engine does.
What a user sees is then read back from the store: verdicts, counted transfers, events.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from chains.models import Block, BlockHeader, BlockTx, TxReceipt
from chains.rebase import ReplacedBlock
from chains.tracker import Reorg
from guard.payment import NATIVE, PaymentSpec
from guard.settlement import SettlementPolicy
from guard.types import Address, BlockHash, BlockNumber, TxHash
from watcher.config.chains import ChainConfig
from watcher.delivery.plan import OutboxPlan
from watcher.engine.apply import apply_block
from watcher.engine.deposits_scan import deposit_candidates
from watcher.engine.fetch import deadline_input
from watcher.engine.matching import match_block
from watcher.engine.memory import ChainMemory
from watcher.engine.observe import ChainPosition
from watcher.engine.payment_registration import PaymentRegistration, new_payment
from watcher.engine.payments_fetch import BlockTransfers
from watcher.engine.payments_scan import candidates
from watcher.engine.rules import ChainRules
from watcher.engine.tags import ChainTags
from watcher.engine.values import BlockInput, BlockOutcome
from watcher.settlements import Registration, register
from watcher.store import SettlementRecord, Store
from watcher.store.deposit_records import NewSubscription

CHAIN = "local"
START_MS = 1_700_000_000_000
SENDER = Address("0x" + "11" * 20)
PAYEE = Address("0x" + "22" * 20)
DEPOSIT_ADDRESS = Address("0x" + "33" * 20)


def tx_hash(label: str) -> TxHash:
    return TxHash("0x" + secrets.token_hex(31) + label.encode().hex()[:2].rjust(2, "0"))


def block_hash(number: int, branch: str) -> BlockHash:
    return BlockHash("0x" + branch.encode().hex().rjust(8, "0") + f"{number:056x}")


@dataclass
class Engine:
    """One chain's store, rules and memory, driven by scripted inputs."""

    config: ChainConfig
    store: Store
    memory: ChainMemory
    rules: ChainRules
    now: int = START_MS
    branch: str = "a"

    def header(self, number: int, branch: str | None = None) -> BlockHeader:
        """The header at ``number`` on ``branch`` (its parent on the same branch, or the
        held header below it)."""
        branch = branch or self.branch
        held = self.memory.window.get(number - 1)
        parent = held.hash if held is not None else block_hash(number - 1, branch)
        return BlockHeader(
            BlockNumber(number), block_hash(number, branch), parent, self.now // 1000
        )

    def block_input(
        self,
        number: int,
        txs: tuple[BlockTx, ...] = (),
        statuses: dict[str, int] | None = None,
        reorg: Reorg | None = None,
        branch: str | None = None,
    ) -> BlockInput:
        """What fetch_block would return for a block of ``txs`` (every tx mined with
        ``statuses`` or 1)."""
        head = self.header(number, branch)
        block = Block(head, txs)
        matches = match_block(txs, self.memory.index)
        statuses = statuses or {}
        receipts = {
            tx.hash: TxReceipt(tx.hash, head.number, head.hash, i, statuses.get(tx.hash, 1))
            for i, tx in enumerate(txs)
        }
        status_of: dict[str, int] = {tx.hash: statuses.get(tx.hash, 1) for tx in txs}
        transfers = BlockTransfers(
            candidates(block, self.memory.payments.watching, status_of, []),
            deposit_candidates(block, self.memory.subscriptions, status_of, []),
        )
        return BlockInput(
            now=self.now,
            head=head,
            position=ChainPosition(head.number, head.hash, None),
            covered=None,
            tags=ChainTags(),
            block=block,
            reorg=reorg,
            node_head=head,
            new_head=True,
            matches=matches,
            receipts={
                h: r for h, r in receipts.items() if h in {t.hash for _, t in matches.matched}
            },
            transfers=transfers,
            subscriptions=dict(self.memory.subscriptions.records),
        )

    def apply(self, inp: BlockInput) -> BlockOutcome:
        """``inp`` in its own transaction; memory moves after the commit."""
        with self.store.block_txn(CHAIN, inp.now) as txn:
            outcome = apply_block(txn, inp, self.rules)
        self.memory.reindex_payments(self.memory.after_commit(outcome))
        return outcome

    def mine(self, number: int, *txs: BlockTx) -> BlockOutcome:
        self.memory.load_new()
        return self.apply(self.block_input(number, txs))

    def verdict(self, rec: SettlementRecord) -> str:
        return self.store.settlement(rec.settlement_id).verdict

    def watch(self, tx: TxHash, timeout_s: float | None = None) -> SettlementRecord:
        rec, _ = register(self.store, Registration(self.config, tx, timeout_s=timeout_s), self.now)
        return rec

    def event_kinds(self, rec: SettlementRecord) -> list[str]:
        return [e.kind for e in self.store.events(rec.settlement_id)]


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    config = ChainConfig.model_validate(
        {
            "name": CHAIN,
            "chain_id": 31337,
            "rpc": ["http://127.0.0.1:9"],
            "confirmations": 3,
            "finality": "depth",
            "poll_interval_s": 0.1,
        }
    )
    store = Store.open(f"sqlite:///{tmp_path / 'apply.db'}")
    store.ensure_chain(CHAIN, 31337, START_MS)
    policy = SettlementPolicy(max_wait_ms=int(config.max_wait_s * 1000))
    rules = ChainRules(config, policy, OutboxPlan(), gated=False)
    memory = ChainMemory(CHAIN, store, config.resolved_header_window)
    memory.load()
    try:
        yield Engine(config, store, memory, rules)
    finally:
        store.close()


def test_an_inclusion_awaits_its_depth_then_is_confirmed_once(engine: Engine) -> None:
    engine.mine(1)
    tx = BlockTx(tx_hash("t"), SENDER, 0, PAYEE, 5)
    rec = engine.watch(tx.hash)
    included = engine.mine(2, tx)
    assert engine.verdict(rec) == "AWAITING_FINALITY"
    assert [r.block_number for r in included.changed] == [2]
    assert engine.memory.window.head is not None and engine.memory.window.head.number == 2
    engine.mine(3)
    assert engine.verdict(rec) == "AWAITING_FINALITY"  # depth 2 of 3
    final = engine.mine(4)
    assert engine.verdict(rec) == "FINALITY_CONFIRMED"
    assert final.confirmed_blocks == (2,) and final.decisions == 1
    assert engine.mine(5).decisions == 0  # confirmed once, never again
    assert rec.settlement_id not in engine.memory.index.by_id  # no longer watched


def test_memory_does_not_move_when_the_transaction_fails(engine: Engine) -> None:
    engine.mine(1)
    tx = BlockTx(tx_hash("f"), SENDER, 0)
    rec = engine.watch(tx.hash)
    engine.memory.load_new()
    inp = engine.block_input(2, (tx,))
    with pytest.raises(RuntimeError), engine.store.block_txn(CHAIN, inp.now) as txn:
        apply_block(txn, inp, engine.rules)
        raise RuntimeError("the commit fails")
    assert engine.store.settlement(rec.settlement_id).block_number is None
    head = engine.memory.window.head
    assert head is not None and head.number == 1
    assert engine.store.chain(CHAIN).head_number == 1  # type: ignore[union-attr]


def test_a_reorg_undoes_an_inclusion_and_records_the_reorg(engine: Engine) -> None:
    engine.mine(1)
    tx = BlockTx(tx_hash("r"), SENDER, 0)
    rec = engine.watch(tx.hash)
    engine.mine(2, tx)
    assert engine.verdict(rec) == "AWAITING_FINALITY"
    ancestor, old = engine.memory.window.get(1), engine.memory.window.get(2)
    assert ancestor is not None and old is not None
    new = engine.header(2, "b")
    reorg = Reorg(
        depth=1,
        common_ancestor=ancestor,
        old_head=old,
        replaced=(ReplacedBlock(BlockNumber(2), old.hash, new.hash),),
    )
    engine.memory.window.rewind_to(1)  # only to script the new branch's header
    inp = engine.block_input(2, (), reorg=reorg, branch="b")
    engine.memory.window.push(old)
    outcome = engine.apply(inp)
    assert outcome.rewind_to == 1
    head = engine.memory.window.head
    assert head is not None and head.hash == new.hash
    assert engine.store.settlement(rec.settlement_id).block_number is None
    assert engine.verdict(rec) == "AWAITING_FINALITY"
    assert "reorg" in [e.kind for e in engine.store.events()]
    engine.branch = "b"
    engine.mine(3, tx)  # re-included on the new branch
    assert engine.store.settlement(rec.settlement_id).block_number == 3


def test_a_deadline_times_a_settlement_out_with_no_new_block(engine: Engine) -> None:
    engine.mine(1)
    rec = engine.watch(tx_hash("d"), timeout_s=30)
    engine.memory.load_new()
    engine.now += 29_000
    early = deadline_input(engine.memory, engine.now)
    assert early is not None and engine.apply(early).decisions == 0
    engine.now += 2_000
    late = deadline_input(engine.memory, engine.now)
    assert late is not None and not late.new_head and late.block is None
    assert engine.apply(late).decisions == 1
    assert engine.verdict(rec) == "TIMEOUT_TREATED_AS_FAILURE"
    head = engine.memory.window.head
    assert head is not None and head.number == 1  # a deadline stores no head


def test_a_native_payment_is_counted_then_confirmed(engine: Engine) -> None:
    engine.mine(1)
    reg = PaymentRegistration(chain=engine.config, spec=PaymentSpec(PAYEE, NATIVE, 1000))
    new, spec = new_payment(reg, engine.now, 1)
    rec, _ = engine.store.register_payment(new, spec)
    engine.mine(2, BlockTx(tx_hash("p"), SENDER, 0, PAYEE, 400))
    engine.mine(3, BlockTx(tx_hash("q"), SENDER, 1, PAYEE, 600))
    counted = [int(t.value) for t in engine.store.payment_transfers(rec.settlement_id)]
    assert counted == [400, 600]
    assert engine.verdict(rec) == "AWAITING_FINALITY"
    engine.mine(4)
    engine.mine(5)
    assert engine.verdict(rec) == "FINALITY_CONFIRMED"
    assert rec.settlement_id not in engine.memory.payments.by_id


def test_a_deposit_to_a_watched_address_is_seen(engine: Engine) -> None:
    engine.mine(1)
    new = NewSubscription(
        subscription_id="sub_apply",
        chain=CHAIN,
        owner="anonymous",
        assets=(NATIVE,),
        confirmations=None,
        commit_url=None,
        reference=None,
        after_block=1,
        created_at=engine.now,
    )
    engine.store.create_subscription(new, [DEPOSIT_ADDRESS])
    engine.mine(2, BlockTx(tx_hash("e"), SENDER, 0, DEPOSIT_ADDRESS, 70))
    (deposit,) = engine.store.deposits_of("sub_apply", None, 0, 10)
    assert engine.event_kinds(deposit) == ["deposit_seen"]
    assert [int(t.value) for t in engine.store.payment_transfers(deposit.settlement_id)] == [70]
