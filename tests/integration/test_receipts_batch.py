"""A block's receipts built and stored together, and a new decision never waits out an old
backoff.

Real anvil, a ChainWatcher driven by hand, the receipts component run as the daemon runs it
after a poll, SQLite and PostgreSQL. Time is the rig's injected clock: nothing sleeps.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from eth_account import Account

from guard.receipts import body_of, typed_data
from guard.verify import verify_receipt
from tests.integration.receipts_helpers import (
    SIGNING_KEY,
    receipts_for,
    registered_in_one_block,
)
from tests.support.anvil import Anvil
from tests.support.rigs import Rig, RigFactory, make_watcher
from watcher.receipts.due import BACKOFF_MS

pytestmark = pytest.mark.anvil


@pytest.fixture
def rig(anvil: Anvil, make_rig: RigFactory) -> Rig:
    return make_rig(anvil, confirmations=2, poll=True)


def _block_of_settlements(rig: Rig, count: int) -> list[str]:
    """``count`` watched txs mined in one block, then final (N = 2)."""
    ids = registered_in_one_block(rig, count)
    rig.watcher.poll()
    rig.mine_and_poll(1)
    assert all(rig.settlement(sid).verdict == "FINALITY_CONFIRMED" for sid in ids)
    return ids


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_blocks_receipts_are_stored_together_or_not_at_all(
    anvil: Anvil, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    url = f"sqlite:///{tmp_path}/b.db" if backend == "sqlite" else request.getfixturevalue("pg_url")
    rig = make_watcher(anvil, url, confirmations=2)
    try:
        rig.watcher.poll()
        ids = _block_of_settlements(rig, 30)
        lost: list[tuple[str, int]] = []
        stale = receipts_for(rig)
        stale.issuer.fence_of = lambda _name: ("another-instance", 7)  # a lease it lost
        stale.issuer.on_lost = lambda name, token: lost.append((name, token))
        stale.run(rig)
        assert lost == [(rig.config.name, 7)]
        assert all(stale.store.for_settlement(sid) == [] for sid in ids)  # not one of them

        receipts = receipts_for(rig)
        receipts.run(rig)  # one batch: every receipt of the block, in one transaction
        stored = [receipts.store.for_settlement(sid) for sid in ids]
        assert all(len(s) == 1 for s in stored)
        assert len({s[0].created_at for s in stored}) == 1
        for sid in ids:
            receipt = receipts.latest(sid)
            verified = verify_receipt(receipt, trusted_signers=[receipts.signer.address])
            assert verified.facts.block_hash == rig.settlement(sid).block_hash
        # Signed with libsecp256k1 directly: the signature eth-account gives for the same
        # EIP-712 message, byte for byte (deterministic, low s).
        receipt = receipts.latest(ids[0])
        expected = Account.sign_typed_data(SIGNING_KEY, full_message=typed_data(body_of(receipt)))
        assert receipt["signature"] == "0x" + bytes(expected.signature).hex()
    finally:
        rig.store.close()


def test_a_reorg_under_a_receipt_in_backoff_gets_the_new_decisions_receipt_at_once(
    anvil: Anvil, rig: Rig
) -> None:
    """The builder refused the decision's block (a reorg replaced it before the tracker saw
    it, and a restarted daemon holds nothing of it), and its retry backed off to a minute;
    the settlement is re-decided on the new branch, and the receipt for that decision comes
    with the next run, without waiting out the old backoff (the chaos soak's 'no finality
    receipt in time')."""
    anvil.mine(2)
    tx = anvil.send()
    anvil.receipt(tx)
    raw = anvil.raw_tx(tx)
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()
    rig.mine_and_poll(1)
    decided = rig.settlement(sid)
    assert decided.verdict == "FINALITY_CONFIRMED"

    anvil.reorg(3, [(raw, 1)])  # the decision's blocks are gone; the tx one block up
    rig.restart()  # nothing of the old block in memory: the node must be asked, and says no
    receipts = receipts_for(rig)
    for wait_s in (0, 1, 2, 5, 15):  # each attempt refused, each backoff waited out
        rig.clock.advance(wait_s)
        receipts.run(rig)
    entry = receipts.issuer._due[rig.config.name][sid]
    assert entry.attempts == 5
    assert entry.next_at - rig.clock() == BACKOFF_MS[4] == 60_000
    assert receipts.store.for_settlement(sid) == []

    rig.watcher.poll()  # the tracker sees the reorg: the decision is reversed
    rig.mine_and_poll(2)  # and taken again on the new branch
    again = rig.settlement(sid)
    assert again.verdict == "FINALITY_CONFIRMED"
    assert again.block_hash != decided.block_hash
    receipts.run(rig)  # the same instant: no backoff to wait out
    verified = verify_receipt(receipts.latest(sid), trusted_signers=[receipts.signer.address])
    assert verified.facts.block_hash == again.block_hash
    assert again.block_number is not None
    assert verified.facts.block_hash == anvil.block(again.block_number)["hash"]


def test_a_reorg_of_only_the_decisions_head_block_restates_the_decision_and_gets_a_receipt(
    anvil: Anvil, rig: Rig
) -> None:
    """The tx stays in its block; a reorg of depth 1 replaces only the block at which the
    settlement was confirmed (its decision's head). The verdict stands, but a receipt must
    rest on blocks the chain still has: the decision is re-stated on the new block at that
    height (a ``decision_restated`` event), and its receipt verifies against the node. Before,
    the receipt waited for ever ("block H is no longer 0x…") — the chaos soak's 'no finality
    receipt in time'."""
    tx = anvil.send()
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()
    rig.mine_and_poll(1)  # N = 2: final at the next block
    decided = rig.settlement(sid)
    assert decided.verdict == "FINALITY_CONFIRMED"
    head = decided.decision["evidence"]["facts"]["head_number"]
    old_head_hash = decided.decision["evidence"]["facts"]["head_hash"]
    assert head == anvil.head() and decided.block_number == head - 1

    anvil.reorg(1, [])  # the head block only: the tx's block stays
    rig.watcher.poll()
    again = rig.settlement(sid)
    assert again.verdict == "FINALITY_CONFIRMED" and again.block_hash == decided.block_hash
    facts = again.decision["evidence"]["facts"]
    assert facts["head_number"] == head
    assert facts["head_hash"] == anvil.block(head)["hash"] != old_head_hash
    assert again.digest != decided.digest
    kinds = [e.kind for e in rig.store.events(settlement_id=sid)]
    assert "decision_restated" in kinds and "finality_violation" not in kinds

    receipts = receipts_for(rig)
    receipts.run(rig)
    verified = verify_receipt(receipts.latest(sid), trusted_signers=[receipts.signer.address])
    assert verified.facts.block_hash == decided.block_hash
    assert verified.facts.anchor == (head, anvil.block(head)["hash"])
