"""ERC-20 payments on a real anvil with a real token (tests/support/erc20.py), and what they
cost: the calls are counted by a real proxy in front of the node (bench/proxy.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.proxy import CountingProxy
from chains.rpc import Web3Transport
from guard.payment import NATIVE, PaymentSpec
from tests.support.anvil import Anvil
from tests.support.erc20 import Token, deploy_token
from tests.support.faulty_proxy import FaultyProxy
from tests.support.rigs import Rig, make_watcher
from watcher.engine.payment_registration import PaymentRegistration, new_payment
from watcher.store import SettlementRecord

pytestmark = pytest.mark.anvil


@pytest.fixture
def proxied(anvil: Anvil, tmp_path: Path) -> Iterator[tuple[Rig, CountingProxy]]:
    proxy = CountingProxy(anvil.url)
    rig = make_watcher(
        anvil, f"sqlite:///{tmp_path}/tok.db", transport=Web3Transport(proxy.url), confirmations=3
    )
    rig.watcher.catch_up()
    yield rig, proxy
    rig.store.close()
    proxy.close()


def register(rig: Rig, to: str, asset: str, amount: int) -> SettlementRecord:
    reg = PaymentRegistration(chain=rig.config, spec=PaymentSpec(to.lower(), asset, amount))
    head = rig.store.chain(rig.config.name)
    rec, _ = rig.store.register_payment(
        *new_payment(reg, rig.clock(), head.head_number if head else None)
    )
    return rec


def asset(token: Token) -> str:
    return token.address.lower()


def paid(rig: Rig, rec: SettlementRecord) -> list[tuple[int, int | None]]:
    return [(int(t.value), t.log_index) for t in rig.store.payment_transfers(rec.settlement_id)]


def polls_get_logs(rig: Rig, proxy: CountingProxy, polls: int) -> list[int]:
    """eth_getLogs calls made by each of ``polls`` polls (a block mined before each)."""
    counts = []
    for _ in range(polls):
        rig.anvil.mine(1)
        before = proxy.calls["eth_getLogs"]
        rig.watcher.poll()
        counts.append(proxy.calls["eth_getLogs"] - before)
    return counts


def test_token_payments_count_only_the_watched_token_to_the_watched_address(
    proxied: tuple[Rig, CountingProxy],
) -> None:
    rig, _ = proxied
    a, b = deploy_token(rig.anvil, symbol="A"), deploy_token(rig.anvil, symbol="B")
    payer, to, other = rig.anvil.accounts[1], rig.anvil.accounts[5], rig.anvil.accounts[6]
    a.mint(payer, 10_000)
    b.mint(payer, 10_000)
    rig.watcher.catch_up()
    rec = register(rig, to, asset(a), 1000)
    b.transfer(1, to, 1000)  # another token
    a.transfer(1, other, 1000)  # another address
    a.transfer(1, to, 400)
    a.transfer_many(1, [(to, 300), (other, 5), (to, 300)])  # three logs in one tx
    rig.watcher.catch_up()
    got = paid(rig, rec)
    assert [v for v, _ in got] == [400, 300, 300]
    assert got[1][1] is not None and got[2][1] == got[1][1] + 2  # their indexes in the block
    assert rig.store.settlement(rec.settlement_id).verdict == "AWAITING_FINALITY"
    rig.mine_and_poll(3)
    assert rig.store.settlement(rec.settlement_id).verdict == "FINALITY_CONFIRMED"


def test_a_reorg_drops_a_token_transfer_before_confirmation(
    proxied: tuple[Rig, CountingProxy],
) -> None:
    rig, _ = proxied
    token = deploy_token(rig.anvil)
    token.mint(rig.anvil.accounts[1], 10_000)
    rig.watcher.catch_up()
    to = rig.anvil.accounts[5]
    rec = register(rig, to, asset(token), 500)
    token.transfer(1, to, 500)
    rig.watcher.catch_up()
    assert [v for v, _ in paid(rig, rec)] == [500]
    rig.anvil.reorg(1)
    rig.mine_and_poll(3)
    assert paid(rig, rec) == []
    assert rig.store.settlement(rec.settlement_id).verdict == "AWAITING_FINALITY"


def test_no_get_logs_without_token_payments_and_one_per_poll_for_many(
    proxied: tuple[Rig, CountingProxy],
) -> None:
    rig, proxy = proxied
    tokens = [deploy_token(rig.anvil, symbol=f"T{i}") for i in range(2)]
    rig.watcher.catch_up()
    assert polls_get_logs(rig, proxy, 3) == [0, 0, 0]  # nothing watched
    register(rig, rig.anvil.accounts[5], NATIVE, 10)
    assert polls_get_logs(rig, proxy, 3) == [0, 0, 0]  # native payments cost no call
    recipients = ["0x" + f"{i:040x}" for i in range(1, 101)]
    for to in recipients:
        for token in tokens:
            register(rig, to, asset(token), 10)
    assert polls_get_logs(rig, proxy, 4) == [1, 1, 1, 1]  # 200 pairs, one call per poll
    before = proxy.calls["eth_getLogs"]
    rig.watcher.poll()  # no new block: nothing to ask
    assert proxy.calls["eth_getLogs"] == before
    tokens[0].mint(rig.anvil.accounts[1], 100)
    tokens[0].transfer(1, recipients[7], 10)
    rig.anvil.mine(2)
    assert polls_get_logs(rig, proxy, 1) == [1]  # three blocks at once: still one


def test_a_token_transfer_re_included_after_a_violation_counts_on_the_new_branch(
    proxied: tuple[Rig, CountingProxy],
) -> None:
    rig, _ = proxied
    token = deploy_token(rig.anvil)
    token.mint(rig.anvil.accounts[1], 10_000)
    rig.watcher.catch_up()
    to = rig.anvil.accounts[5]
    rec = register(rig, to, asset(token), 500)
    tx = token.transfer(1, to, 500)
    raw = rig.anvil.raw_tx(tx)
    rig.mine_and_poll(3)
    assert rig.store.settlement(rec.settlement_id).verdict == "FINALITY_CONFIRMED"
    rig.anvil.reorg(4, [(raw, 1)])  # the transfer again, one block higher
    rig.mine_and_poll(4)
    again = rig.store.payment_transfers(rec.settlement_id)
    assert [t.tx_hash for t in again] == [tx]
    assert len(rig.events(rec.settlement_id, "finality_violation")) == 1
    assert rig.store.settlement(rec.settlement_id).verdict == "FINALITY_CONFIRMED"


def test_a_node_capping_the_logs_range_is_asked_for_fewer_blocks(
    anvil: Anvil, tmp_path: Path
) -> None:
    proxy = FaultyProxy(anvil.url)
    rig = make_watcher(
        anvil, f"sqlite:///{tmp_path}/cap.db", transport=Web3Transport(proxy.url), confirmations=3
    )
    try:
        token = deploy_token(rig.anvil)
        token.mint(rig.anvil.accounts[1], 10_000)
        rig.watcher.catch_up()
        to = rig.anvil.accounts[5]
        rec = register(rig, to, asset(token), 500)
        proxy.logs_max_blocks = 2  # as a hosted provider caps a query's range
        rig.anvil.mine(5)
        token.transfer(1, to, 500)
        rig.anvil.mine(4)  # ten new blocks, the transfer in the sixth
        rig.watcher.catch_up()
        assert [int(t.value) for t in rig.store.payment_transfers(rec.settlement_id)] == [500]
        assert rig.store.settlement(rec.settlement_id).verdict == "FINALITY_CONFIRMED"
        assert rig.watcher.head is not None and rig.watcher.head.number == rig.anvil.head()
    finally:
        rig.store.close()
        proxy.close()
