"""Deposits on chains whose rule is a tag (``finalized``, ``safe``), on a real anvil with
``--slots-in-an-epoch 4``: ``safe`` = latest - 4, ``finalized`` = latest - 8.

What a user of such a chain notices: a deposit waits for its rule's tag, not for depth, and
becomes final with a receipt that names the tag when the tag reaches its block. What an
operator notices: until then, a block does not pick it up to decide it again. The reads that
pick a block's deposits once took any deposit three blocks deep as "may be final", whatever
its rule; on Ethereum (a deposit waits 64 blocks) every awaiting deposit was then decided
again, the whole way, at every block (bench/README.md, "Deposits on a chain whose rule is
the finalized tag").
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from guard.payment import NATIVE
from guard.settlement import Verdict
from tests.integration.deposit_helpers import deposits, pay, subscribe
from tests.support.anvil import Anvil
from tests.support.rigs import Rig, RigFactory
from watcher.store.deposits_ripe import ripe_deposits
from watcher.store.payments_store import payments_due

pytestmark = pytest.mark.anvil

LAG = {"safe": 4, "finalized": 8}
"""How far each tag trails anvil's head with 4 slots an epoch."""


def _picked(rig: Rig) -> set[str]:
    """The deposits a block at the rig's stored head would pick to decide (both reads)."""
    chain = rig.store.chain(rig.config.name)
    assert chain is not None and chain.head_number is not None
    head = chain.head_number
    tags = {
        "finalized": int(rig.anvil.block("finalized")["number"], 16),
        "safe": int(rig.anvil.block("safe")["number"], 16),
    }
    with rig.store.block_txn(rig.config.name, rig.clock()) as txn:
        narrow = {d.settlement_id for d in ripe_deposits(txn, head, **tags)}
        rest = {r.settlement_id for r in payments_due(txn, 0, head, plain_deposits=False, **tags)}
    return narrow | rest


@pytest.mark.parametrize("rule", sorted(LAG))
def test_a_deposit_waits_for_its_tag_unread_then_is_final_on_it(
    rule: str, start_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    anvil = start_anvil("--slots-in-an-epoch", "4")
    anvil.mine(10)  # both tags above 0
    rig = make_rig(anvil, confirmations=3, finality=rule, start=True, poll=True)
    address = "0x" + "de" * 20
    sub = subscribe(rig, [address], [NATIVE])
    pay(rig, 1, address, 1_000)
    rig.watcher.catch_up()
    (seen,) = deposits(rig, sub)
    block = anvil.head()

    anvil.mine(LAG[rule] - 1)  # 3 deep long since; the tag one block short of the deposit
    rig.watcher.catch_up()
    (waiting,) = deposits(rig, sub)
    assert waiting.verdict == Verdict.AWAITING_FINALITY
    assert waiting.digest == seen.digest  # its decision not taken again
    assert _picked(rig) == set()

    anvil.mine(1)  # the tag reaches the deposit's block
    assert int(anvil.block(rule)["number"], 16) == block
    assert _picked(rig) == {seen.settlement_id}
    rig.watcher.catch_up()
    (final,) = deposits(rig, sub)
    assert final.verdict == Verdict.FINALITY_CONFIRMED
    assert final.decision["evidence"]["kind"] == rule  # the basis its receipt names
