"""Payments to an address, counted by the real engine on a real anvil (native coin).

Each test registers a payment as the API does (no call), sends real value transfers, mines,
and lets the watcher process the blocks; the clock is injected, nothing sleeps.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from guard.payment import NATIVE, PaymentSpec
from tests.support.anvil import Anvil
from tests.support.rigs import Rig, RigFactory, make_watcher
from watcher.engine.payment_registration import PaymentRegistration, new_payment
from watcher.store import SettlementRecord

pytestmark = pytest.mark.anvil

# init code that deploys the runtime 0x60006000fd (REVERT on every call): a recipient whose
# incoming value transfers mine with status 0.
REVERTING_CONTRACT = "0x6460006000fd6000526005601bf3"


@pytest.fixture
def rig(anvil: Anvil, store_url: str, make_rig: RigFactory) -> Rig:
    """A watcher over SQLite and over PostgreSQL (the ``store_url`` fixture)."""
    r = make_rig(anvil, store_url=store_url, confirmations=3)
    r.watcher.catch_up()
    return r


def register_payment(rig: Rig, to: str, amount: int, **kw: Any) -> SettlementRecord:
    sender = kw.pop("sender", None)
    reg = PaymentRegistration(
        chain=rig.config, spec=PaymentSpec(to.lower(), NATIVE, amount, sender), **kw
    )
    head = rig.store.chain(rig.config.name)
    new, spec = new_payment(reg, rig.clock(), head.head_number if head else None)
    rec, _ = rig.store.register_payment(new, spec)
    return rec


def pay(rig: Rig, sender: int, to: str, value: int, **extra: Any) -> str:
    tx = {"from": rig.anvil.accounts[sender], "to": to, "value": hex(value), **extra}
    tx_hash = str(rig.anvil.rpc("eth_sendTransaction", tx))
    rig.anvil.receipt(tx_hash)
    return tx_hash


def verdict(rig: Rig, rec: SettlementRecord) -> str:
    return rig.store.settlement(rec.settlement_id).verdict


def paid(rig: Rig, rec: SettlementRecord) -> list[int]:
    return [int(t.value) for t in rig.store.payment_transfers(rec.settlement_id)]


@pytest.mark.parametrize(
    ("payments", "final"),
    [
        ([1000], "FINALITY_CONFIRMED"),
        ([400, 600], "FINALITY_CONFIRMED"),
        ([1500], "FINALITY_CONFIRMED"),
        ([999], "AWAITING_FINALITY"),
    ],
    ids=["exact", "split", "over", "partial"],
)
def test_native_payments_confirm_once_final_transfers_cover_the_amount(
    rig: Rig, payments: list[int], final: str
) -> None:
    to = rig.anvil.accounts[5]
    rec = register_payment(rig, to, 1000)
    for value in payments:
        pay(rig, 1, to, value)
    rig.watcher.catch_up()
    assert paid(rig, rec) == payments
    assert verdict(rig, rec) == "AWAITING_FINALITY"  # counted, not final yet
    rig.mine_and_poll(3)
    assert verdict(rig, rec) == final
    if final == "FINALITY_CONFIRMED":
        evidence = rig.store.settlement(rec.settlement_id).decision["evidence"]["facts"]
        assert evidence["paid_final"] == str(sum(payments))
        assert evidence["overpaid"] == str(max(0, sum(payments) - 1000))


def test_transfers_elsewhere_from_others_or_reverted_are_not_counted(rig: Rig) -> None:
    to = rig.anvil.accounts[5]
    only_from_2 = register_payment(rig, to, 1000, sender=rig.anvil.accounts[2].lower())
    create = rig.anvil.rpc(
        "eth_sendTransaction", {"from": rig.anvil.accounts[0], "data": REVERTING_CONTRACT}
    )
    contract = rig.anvil.receipt(create)["contractAddress"]
    to_contract = register_payment(rig, contract, 10)
    pay(rig, 1, rig.anvil.accounts[6], 1000)  # another address
    pay(rig, 1, to, 1000)  # from another sender
    reverted = pay(rig, 1, contract, 10, gas=hex(50_000))
    assert rig.anvil.receipt(reverted)["status"] == "0x0"
    rig.mine_and_poll(4)
    assert paid(rig, only_from_2) == [] and paid(rig, to_contract) == []
    pay(rig, 2, to, 1000)
    rig.mine_and_poll(3)
    assert paid(rig, only_from_2) == [1000]
    assert verdict(rig, only_from_2) == "FINALITY_CONFIRMED"


def test_transfers_before_registration_do_not_count(rig: Rig) -> None:
    to = rig.anvil.accounts[5]
    pay(rig, 1, to, 1000)
    rig.watcher.catch_up()
    rec = register_payment(rig, to, 1000)
    rig.mine_and_poll(5)
    assert paid(rig, rec) == [] and verdict(rig, rec) == "AWAITING_FINALITY"


def test_a_reorg_removes_a_counted_transfer_before_confirmation(rig: Rig) -> None:
    to = rig.anvil.accounts[5]
    rec = register_payment(rig, to, 1000)
    pay(rig, 1, to, 1000)
    rig.watcher.catch_up()
    assert paid(rig, rec) == [1000]
    rig.anvil.reorg(1)  # anvil erases the tx of the replaced block
    rig.mine_and_poll(3)
    assert paid(rig, rec) == []
    assert verdict(rig, rec) == "AWAITING_FINALITY"
    assert rig.events(rec.settlement_id, "finality_violation") == []
    (reorged,) = rig.events(rec.settlement_id, "payment_transfer_reorged")
    assert [t["value"] for t in reorged.payload["removed"]] == ["1000"]


def test_a_reorg_re_including_the_transfer_counts_it_on_the_new_branch(rig: Rig) -> None:
    to = rig.anvil.accounts[5]
    rec = register_payment(rig, to, 1000)
    tx = pay(rig, 1, to, 1000)
    raw = rig.anvil.raw_tx(tx)
    rig.watcher.catch_up()
    old = rig.store.payment_transfers(rec.settlement_id)[0]
    rig.anvil.reorg(1, [(raw, 0)])
    rig.mine_and_poll(3)
    again = rig.store.payment_transfers(rec.settlement_id)
    assert [t.tx_hash for t in again] == [tx] and again[0].block_hash != old.block_hash
    assert verdict(rig, rec) == "FINALITY_CONFIRMED"


def test_a_reorg_after_confirmation_is_a_finality_violation(rig: Rig) -> None:
    to = rig.anvil.accounts[5]
    rec = register_payment(rig, to, 1000)
    pay(rig, 1, to, 1000)
    rig.mine_and_poll(3)
    assert verdict(rig, rec) == "FINALITY_CONFIRMED"
    rig.anvil.reorg(4)  # the transfer's block and the 3 above it
    rig.mine_and_poll(1)
    assert paid(rig, rec) == []
    assert len(rig.events(rec.settlement_id, "finality_violation")) == 1
    assert verdict(rig, rec) == "AWAITING_FINALITY"
    assert rig.store.settlement(rec.settlement_id).watching


def test_a_timeout_with_a_partial_payment_says_what_was_paid(rig: Rig) -> None:
    to = rig.anvil.accounts[5]
    rec = register_payment(rig, to, 1000, timeout_s=30)
    pay(rig, 1, to, 250)
    rig.mine_and_poll(4)
    rig.clock.advance(31)
    rig.mine_and_poll(1)
    stored = rig.store.settlement(rec.settlement_id)
    assert stored.verdict == "TIMEOUT_TREATED_AS_FAILURE"
    assert "Paid 250 of 1000 wei" in stored.decision["directive"]
    assert "refund" in stored.decision["directive"]
    assert stored.decision["evidence"]["facts"]["paid"] == "250"


def test_two_payments_to_one_address_share_its_transfers_in_order(rig: Rig) -> None:
    to = rig.anvil.accounts[5]
    first = register_payment(rig, to, 1000)
    second = register_payment(rig, to, 1000)
    pay(rig, 1, to, 1000)
    pay(rig, 1, to, 1000)
    rig.mine_and_poll(3)
    assert paid(rig, first) == [1000] and paid(rig, second) == [1000]
    assert verdict(rig, first) == verdict(rig, second) == "FINALITY_CONFIRMED"


def test_under_the_finalized_rule_a_payment_waits_for_the_tag(
    start_anvil: Callable[..., Anvil], tmp_path: Path
) -> None:
    anvil = start_anvil("--slots-in-an-epoch", "4")  # finalized = latest - 8
    r = make_watcher(anvil, f"sqlite:///{tmp_path}/fin.db", confirmations=2, finality="finalized")
    try:
        r.watcher.catch_up()
        to = anvil.accounts[5]
        rec = register_payment(r, to, 1000)
        pay(r, 1, to, 1000)
        r.mine_and_poll(4)  # deep enough for depth 2, not finalized
        assert verdict(r, rec) == "AWAITING_FINALITY"
        r.mine_and_poll(6)  # the finalized tag reaches the transfer's block
        stored = r.store.settlement(rec.settlement_id)
        assert stored.verdict == "FINALITY_CONFIRMED"
        assert stored.decision["evidence"]["kind"] == "finalized"
    finally:
        r.store.close()


def test_a_restarted_watcher_rebuilds_its_payment_index_from_the_store(rig: Rig) -> None:
    to = rig.anvil.accounts[5]
    rec = register_payment(rig, to, 1000)
    pay(rig, 1, to, 400)
    rig.watcher.catch_up()
    rig.restart()
    pay(rig, 2, to, 600)
    rig.mine_and_poll(3)
    assert paid(rig, rec) == [400, 600]
    assert verdict(rig, rec) == "FINALITY_CONFIRMED"


def test_a_payment_completed_after_its_timeout_is_late_finality(rig: Rig) -> None:
    to = rig.anvil.accounts[5]
    rec = register_payment(rig, to, 1000, timeout_s=30)
    pay(rig, 1, to, 400)
    rig.watcher.catch_up()
    rig.clock.advance(31)
    rig.mine_and_poll(1)
    assert verdict(rig, rec) == "TIMEOUT_TREATED_AS_FAILURE"
    pay(rig, 2, to, 600)  # the rest arrives late, while still watched for late finality
    rig.mine_and_poll(3)
    assert verdict(rig, rec) == "TIMEOUT_TREATED_AS_FAILURE"  # the timeout stands
    (late,) = rig.events(rec.settlement_id, "late_finality")
    assert late.payload["finality"]["facts"]["paid_final"] == "1000"
