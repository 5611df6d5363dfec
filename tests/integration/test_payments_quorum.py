"""A payment under a quorum of endpoints: its transfer's block must be seen by k of them.

One anvil, a second forked from it before the payment's block (a node on a competing chain),
fault-injecting proxies in front (tests/integration/quorum_helpers.py), as for a tx."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from guard.payment import NATIVE, PaymentSpec
from tests.integration.deposit_helpers import deposits, event_kinds, pay, subscribe
from tests.integration.quorum_helpers import MultiRig, multi_rig
from tests.support.anvil import Anvil
from watcher.engine.payment_registration import PaymentRegistration, new_payment

pytestmark = pytest.mark.anvil


@contextmanager
def _two_endpoints(
    start_anvil: Callable[..., Anvil], tmp_path: Path
) -> Iterator[tuple[Anvil, MultiRig, int]]:
    """A node, a watcher needing 2 of its 2 endpoints (both the node, through proxies) and
    the head it has polled: the block a competing chain forks from (:func:`_fork`)."""
    main = start_anvil()
    main.mine(2)
    rig = multi_rig(main, f"sqlite:///{tmp_path}/q.db", [main.url, main.url], quorum=2)
    try:
        rig.watcher.poll()
        yield main, rig, main.head()
    finally:
        rig.close()


def _fork(start_anvil: Callable[..., Anvil], main: Anvil, rig: MultiRig, at: int) -> None:
    """The second endpoint moved onto a chain forked from ``main`` at ``at``, 8 blocks long;
    then 3 polls of 2 new blocks each on ``main``."""
    fork = start_anvil("--fork-url", main.url, "--fork-block-number", str(at))
    fork.mine(8)
    rig.proxies[1].upstream = fork.url  # the second endpoint is on another chain
    for _ in range(3):
        rig.mine_and_poll(2)


def test_a_payment_waits_while_an_endpoint_shows_another_chain(
    start_anvil: Callable[..., Anvil], tmp_path: Path
) -> None:
    with _two_endpoints(start_anvil, tmp_path) as (main, rig, fork_point):
        to = main.accounts[5]
        reg = PaymentRegistration(chain=rig.config, spec=PaymentSpec(to.lower(), NATIVE, 1000))
        head = rig.store.chain(rig.config.name)
        rec, _ = rig.store.register_payment(
            *new_payment(reg, rig.clock(), head.head_number if head else None)
        )
        tx = {"from": main.accounts[1], "to": to, "value": hex(1000)}
        main.receipt(main.rpc("eth_sendTransaction", tx))
        _fork(start_anvil, main, rig, fork_point)
        waiting = rig.store.settlement(rec.settlement_id)
        assert [int(t.value) for t in rig.store.payment_transfers(rec.settlement_id)] == [1000]
        assert waiting.verdict == "AWAITING_FINALITY"
        assert waiting.decision["evidence"]["kind"] == "awaiting_quorum"
        rig.proxies[1].upstream = main.url  # back on the main chain: two agree
        rig.mine_and_poll(1)
        assert rig.store.settlement(rec.settlement_id).verdict == "FINALITY_CONFIRMED"


def test_a_deposit_waits_while_an_endpoint_shows_another_chain(
    start_anvil: Callable[..., Anvil], tmp_path: Path
) -> None:
    """The same for a deposit: a block's ripe deposits are read narrowly
    (watcher/store/deposits_ripe.py), and one the gate holds is decided the whole way,
    waiting with its reason; once two endpoints agree it is final."""
    with _two_endpoints(start_anvil, tmp_path) as (main, rig, fork_point):
        to = "0x" + "d0" * 20
        sub = subscribe(rig, [to], [NATIVE])
        pay(rig, 1, to, 1000)
        _fork(start_anvil, main, rig, fork_point)
        (waiting,) = deposits(rig, sub)
        assert [int(t.value) for t in rig.store.payment_transfers(waiting.settlement_id)] == [1000]
        assert waiting.verdict == "AWAITING_FINALITY"
        assert waiting.decision["evidence"]["kind"] == "awaiting_quorum"
        rig.proxies[1].upstream = main.url  # back on the main chain: two agree
        rig.mine_and_poll(1)
        (final,) = deposits(rig, sub)
        assert final.verdict == "FINALITY_CONFIRMED"
        assert event_kinds(rig, final.settlement_id) == ["deposit_seen", "deposit_confirmed"]
