"""Deposits (standing address watches) counted by the real engine on a real anvil: native
transfers and a real ERC-20 (tests/support/contracts/Token.sol, compiled by solc), seen then
final with receipts that verify offline; reorgs before and after final; restarts and a
second instance on the same PostgreSQL store neither lose nor repeat a deposit.

One anvil serves the module (each test uses addresses of its own); each test has its own
store and watcher. The clock is injected; nothing sleeps.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from guard.errors import ReceiptInvalid
from guard.payment import NATIVE
from guard.receipt_format import body_of
from guard.verify import verify_receipt
from tests.e2e.test_payments_receipts_engine import issuer
from tests.integration.deposit_helpers import deposits, event_kinds, facts, pay, subscribe
from tests.support.anvil import Anvil
from tests.support.erc20 import Token, deploy_token
from tests.support.rigs import FakeClock, Rig, RigFactory, make_watcher
from watcher.store.deposits_ripe import ripe_deposits
from watcher.store.payments_store import payments_due

pytestmark = pytest.mark.anvil
N = 3


@pytest.fixture(scope="module")
def node() -> Iterator[Anvil]:
    anvil = Anvil()
    yield anvil
    anvil.stop()


@pytest.fixture(scope="module")
def token(node: Anvil) -> Token:
    t = deploy_token(node)
    t.mint(node.accounts[1], 10**12)
    return t


def fresh(count: int) -> list[str]:
    """Addresses no other test watches."""
    base = int.from_bytes(__import__("os").urandom(8), "big") << 64
    return ["0x" + f"{base + i:040x}" for i in range(count)]


@pytest.fixture
def rig(node: Anvil, store_url: str, make_rig: RigFactory) -> Rig:
    """A watcher over SQLite and over PostgreSQL (the ``store_url`` fixture): a block's
    deposit rows are written on each driver's own cursor."""
    start = int(node.block()["timestamp"], 16) * 1000
    r = make_rig(node, store_url=store_url, clock=FakeClock(start), confirmations=N)
    r.watcher.catch_up()
    return r


def test_many_addresses_each_transfer_seen_once_then_final_with_a_receipt_proving_it(
    rig: Rig, token: Token
) -> None:
    watched = fresh(300)
    sub = subscribe(rig, watched, [NATIVE, token.address])
    native_tx = pay(rig, 1, watched[7], 12_345)
    token_tx = token.transfer_many(1, [(watched[250], 40), (fresh(1)[0], 5), (watched[3], 60)])
    rig.watcher.catch_up()
    seen = deposits(rig, sub)
    assert sorted(facts(rig, d)[0][2] for d in seen) == ["12345", "40", "60"]
    assert {d.verdict for d in seen} == {"AWAITING_FINALITY"}
    for _ in range(2):  # processing again (a restart) adds nothing
        rig.restart().catch_up()
    rig.mine_and_poll(N)
    final = deposits(rig, sub)
    assert [d.settlement_id for d in final] == [d.settlement_id for d in seen]
    assert {d.verdict for d in final} == {"FINALITY_CONFIRMED"}
    receipts = issuer(rig)
    receipts.run(rig)
    payer = rig.anvil.accounts[1].lower()
    by_value = {}
    for d in final:
        # One event per deposit state: seen, then confirmed (no settlement_confirmed beside).
        assert event_kinds(rig, d.settlement_id) == ["deposit_seen", "deposit_confirmed"]
        (said,) = [e.payload for e in rig.events(d.settlement_id) if e.kind == "deposit_confirmed"]
        assert said["subscription_id"] == sub and said["verdict"] == "FINALITY_CONFIRMED"
        assert said["digest"] == d.digest and said["amount"] == facts(rig, d)[0][2]
        receipt = receipts.latest(d.settlement_id)
        verify_receipt(receipt)
        (transfer,) = receipt["payment"]["transfers"]
        assert transfer["from"] == payer and receipt["payment"]["from"] == payer
        assert receipt["payment"]["amount"] == transfer["value"]
        by_value[transfer["value"]] = transfer
    assert by_value["12345"]["tx_hash"] == native_tx and by_value["12345"]["log_index"] is None
    assert by_value["40"]["tx_hash"] == token_tx == by_value["60"]["tx_hash"]
    assert by_value["60"]["log_index"] == by_value["40"]["log_index"] + 2  # the third log


def test_a_reorg_takes_a_seen_deposit_back_and_a_re_included_one_counts_once(
    rig: Rig,
) -> None:
    gone, back = fresh(2)
    sub = subscribe(rig, [gone, back], [NATIVE])
    gone_tx = pay(rig, 2, gone, 1_000)
    gone_block = rig.anvil.block("latest")
    kept = pay(rig, 1, back, 2_000)  # another sender: its nonce does not need the lost tx
    raw = rig.anvil.raw_tx(kept)
    rig.watcher.catch_up()
    assert len(deposits(rig, sub)) == 2
    rig.anvil.reorg(2, [(raw, 1)])  # both blocks replaced; only the second tx comes back
    rig.mine_and_poll(N)
    after = {facts(rig, d)[0][2] if facts(rig, d) else "gone": d for d in deposits(rig, sub)}
    assert set(after) == {"gone", "2000"}
    lost, again = after["gone"], after["2000"]
    assert lost.verdict == "AWAITING_FINALITY"  # never final
    assert event_kinds(rig, lost.settlement_id) == ["deposit_seen", "deposit_reorged"]
    assert again.verdict == "FINALITY_CONFIRMED"
    assert event_kinds(rig, again.settlement_id).count("deposit_seen") == 1
    assert facts(rig, again)[0][0] == kept
    rig.clock.advance(seconds=rig.config.timeout_s + 1)
    rig.mine_and_poll(1)
    failed = rig.store.settlement(lost.settlement_id)
    assert failed.verdict == "SETTLEMENT_FAILED"
    assert "taken out by a reorg" in failed.decision["directive"]
    assert failed.decision["evidence"]["kind"] == "reorged_out"
    receipts = issuer(rig)
    receipts.run(rig)
    receipt = receipts.latest(lost.settlement_id)
    assert receipt["kind"] == "settlement_failure_receipt"
    assert receipt["failure"]["reason"] == "reorged_out"
    seen = receipt["failure"]["transfer"]
    assert (seen["tx_hash"], seen["value"]) == (gone_tx, "1000")
    assert seen["block_hash"] == gone_block["hash"]
    verify_receipt(receipt)
    canonical = rig.anvil.block(int(gone_block["number"], 16))["hash"]
    forged = {**seen, "block_hash": canonical}  # as if the block had stayed
    with pytest.raises(ReceiptInvalid, match="was not reorged out"):
        verify_receipt(
            resigned(receipts, receipt, failure={**receipt["failure"], "transfer": forged})
        )
    more = {**seen, "value": "999999"}
    with pytest.raises(ReceiptInvalid, match="is not the deposit's amount"):
        verify_receipt(
            resigned(receipts, receipt, failure={**receipt["failure"], "transfer": more})
        )


def test_a_deposit_re_included_lower_is_final_once_its_new_block_is_deep_enough(
    rig: Rig,
) -> None:
    """A block finds the deposits it may make final by their block keys
    (watcher/store/deposits_ripe.py): a re-included deposit's keys follow its transfer down
    (watcher/store/deposits_store.py ``lower_deposit_blocks``), so it is final when its new
    block is N deep, not when the block it left would have been."""
    stays, moves = fresh(2)
    sub = subscribe(rig, [stays, moves], [NATIVE])
    pay(rig, 1, stays, 5)
    low = rig.anvil.head()
    moved = pay(rig, 2, moves, 7)  # the block above
    rig.watcher.catch_up()
    rig.anvil.reorg(2, [(rig.anvil.raw_tx(moved), 0)])  # both replaced; it comes back lower
    assert int(rig.anvil.receipt(moved)["blockNumber"], 16) == low
    rig.watcher.catch_up()
    (again,) = [d for d in deposits(rig, sub) if facts(rig, d) and facts(rig, d)[0][2] == "7"]
    assert again.verdict == "AWAITING_FINALITY"
    rig.mine_and_poll(low + N - 1 - rig.anvil.head())  # its new block N deep
    assert rig.store.settlement(again.settlement_id).verdict == "FINALITY_CONFIRMED"
    assert event_kinds(rig, again.settlement_id).count("deposit_seen") == 1


def resigned(receipts: Any, receipt: dict[str, Any], **changed: Any) -> dict[str, Any]:
    """``receipt`` with ``changed`` fields, signed again by the same key (so only the
    verifier's checks of the content can refuse it)."""
    signed: dict[str, Any] = receipts.signer.sign({**body_of(receipt), **changed})
    return signed


def test_a_reorg_after_final_is_a_violation_with_its_revocation(rig: Rig) -> None:
    (to,) = fresh(1)
    sub = subscribe(rig, [to], [NATIVE])
    pay(rig, 1, to, 777)
    rig.mine_and_poll(N)
    (dep,) = deposits(rig, sub)
    assert dep.verdict == "FINALITY_CONFIRMED"
    receipts = issuer(rig)
    receipts.run(rig)
    rig.anvil.reorg(N + 1)
    rig.mine_and_poll(1)
    assert "finality_violation" in event_kinds(rig, dep.settlement_id)
    assert "deposit_reorged" in event_kinds(rig, dep.settlement_id)
    receipts.run(rig)
    assert receipts.store.latest(dep.settlement_id) is None  # withdrawn by its revocation


def test_two_instances_on_postgresql_neither_lose_nor_repeat_a_deposit(
    node: Anvil, pg_url: str, token: Token
) -> None:
    first = make_watcher(node, pg_url, confirmations=N)
    first.watcher.catch_up()
    watched = fresh(20)
    sub = subscribe(first, watched, [NATIVE, token.address])
    pay(first, 1, watched[0], 1)
    first.watcher.catch_up()
    second = make_watcher(node, pg_url, first.clock, confirmations=N)  # the successor
    token.transfer(1, watched[1], 2)
    pay(first, 1, watched[2], 3)
    second.watcher.catch_up()
    first.watcher.reset()  # the predecessor comes back later: it reloads from the store
    first.mine_and_poll(N)
    second.mine_and_poll(1)
    got = deposits(first, sub)
    assert sorted(facts(first, d)[0][2] for d in got) == ["1", "2", "3"]
    assert {d.verdict for d in got} == {"FINALITY_CONFIRMED"}
    assert all(event_kinds(first, d.settlement_id).count("deposit_seen") == 1 for d in got)
    first.store.close()
    second.store.close()


def test_a_deleted_subscription_keeps_its_seen_deposit_through_a_reorg_but_gets_no_new_one(
    rig: Rig,
) -> None:
    (to,) = fresh(1)
    sub = subscribe(rig, [to], [NATIVE])
    tx = pay(rig, 1, to, 5)
    raw = rig.anvil.raw_tx(tx)
    rig.watcher.catch_up()
    rig.store.stop_subscription(sub, "anonymous")
    rig.anvil.reorg(1, [(raw, 0)])  # the seen deposit's tx is included again
    rig.mine_and_poll(N)
    pay(rig, 1, to, 6)  # after the delete: not a deposit
    rig.mine_and_poll(N)
    (dep,) = deposits(rig, sub)
    assert dep.verdict == "FINALITY_CONFIRMED" and facts(rig, dep)[0][0] == tx
    assert rig.watcher.subscriptions.subscriptions == {}  # nothing of it is matched any more


def test_the_narrow_read_of_ripe_deposits_is_exactly_what_the_whole_read_leaves_out(
    rig: Rig,
) -> None:
    """A block making deposits final reads the ripe ones awaiting finality narrowly
    (watcher/store/deposits_ripe.py) and the rest whole (payments_due without them): the two
    reads are disjoint and together what the whole read alone gives, at a head where one
    deposit is ripe and another is not, and past their deadline (then nothing is ripe
    before its deadline: both are due by it)."""
    early, late = fresh(2)
    sub = subscribe(rig, [early, late], [NATIVE])
    pay(rig, 1, early, 10)
    rig.watcher.catch_up()
    pay(rig, 1, late, 20)  # the next block
    rig.watcher.catch_up()
    ids = {facts(rig, d)[0][2]: d.settlement_id for d in deposits(rig, sub)}
    head = rig.store.chain(rig.config.name)
    assert head is not None and head.head_number is not None
    ripe_at = head.head_number + 1  # the early deposit's block N deep, the late one's not
    deadline = max(d.deadline for d in deposits(rig, sub))

    def reads(now: int) -> tuple[set[str], set[str], set[str]]:
        with rig.store.block_txn(rig.config.name, now) as txn:
            whole = {r.settlement_id for r in payments_due(txn, 0, ripe_at)}
            rest = {r.settlement_id for r in payments_due(txn, 0, ripe_at, plain_deposits=False)}
            narrow = [d.settlement_id for d in ripe_deposits(txn, ripe_at)]
        assert len(narrow) == len(set(narrow))
        return whole, rest, set(narrow)

    whole, rest, narrow = reads(rig.clock())
    assert narrow == {ids["10"]} and not rest & narrow and whole == rest | narrow
    whole, rest, narrow = reads(deadline)
    assert narrow == set() and whole == rest >= {ids["10"], ids["20"]}
