"""Finality rules on a real node: what each one waits for, what its receipt says it rests on.

anvil with ``--slots-in-an-epoch 4`` serves ``safe`` = latest - 4 and ``finalized`` =
latest - 8, so with N = 3 one transaction meets, in order: depth N (head = block + 2), the
safe tag (block + 4), the finalized tag (block + 8). Several watchers, one per rule, follow
the same node and the same transaction; nothing waits on the wall clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from guard.errors import ReceiptInvalid
from guard.receipts import body_of
from guard.verify import verify_receipt
from tests.integration.helpers import wait_included
from tests.integration.receipts_helpers import receipts_for
from tests.support.anvil import Anvil
from tests.support.rigs import Rig, RigFactory

CONFIRMED = "FINALITY_CONFIRMED"
AWAITING = "AWAITING_FINALITY"
MODES = ("depth", "safe", "finalized", "depth_and_finalized", "depth_or_finalized")


def _follow(anvil: Anvil, make_rig: RigFactory) -> tuple[dict[str, Rig], dict[str, str], int]:
    """One watcher per rule over one node, each watching the same fresh transaction."""
    rigs = {
        mode: make_rig(anvil, confirmations=3, finality=mode, start=True, poll=True)
        for mode in MODES
    }
    anvil.mine(10)  # tags above 0, so "not covered yet" is a real answer below
    tx = anvil.send()
    block = wait_included(anvil, tx)
    sids = {mode: rig.register(tx).settlement_id for mode, rig in rigs.items()}
    for rig in rigs.values():
        rig.watcher.catch_up()
    return rigs, sids, block


def _advance_to(anvil: Anvil, rigs: dict[str, Rig], head: int) -> None:
    anvil.mine(head - anvil.head())
    for rig in rigs.values():
        rig.watcher.catch_up()


def test_each_rule_confirms_at_its_own_evidence_and_says_which(
    start_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    anvil = start_anvil("--slots-in-an-epoch", "4")
    rigs, sids, block = _follow(anvil, make_rig)

    def verdicts() -> dict[str, str]:
        return {mode: rigs[mode].view(sids[mode])["verdict"] for mode in MODES}

    _advance_to(anvil, rigs, block + 2)  # depth 3 = N; safe and finalized below the block
    assert int(anvil.block("finalized")["number"], 16) < block
    assert int(anvil.block("safe")["number"], 16) < block
    assert verdicts() == {
        "depth": CONFIRMED,
        "safe": AWAITING,
        "finalized": AWAITING,
        "depth_and_finalized": AWAITING,  # deep enough, but not finalized: not final
        "depth_or_finalized": CONFIRMED,
    }

    _advance_to(anvil, rigs, block + 4)  # the safe tag reaches the block
    assert int(anvil.block("safe")["number"], 16) == block
    assert verdicts()["safe"] == CONFIRMED
    assert verdicts()["finalized"] == verdicts()["depth_and_finalized"] == AWAITING

    _advance_to(anvil, rigs, block + 8)  # the finalized tag reaches the block
    assert int(anvil.block("finalized")["number"], 16) == block
    assert set(verdicts().values()) == {CONFIRMED}

    bases = {mode: rigs[mode].view(sids[mode])["evidence"]["kind"] for mode in MODES}
    assert bases == {
        "depth": "depth",
        "safe": "safe",
        "finalized": "finalized",
        "depth_and_finalized": "depth_and_finalized",
        "depth_or_finalized": "depth",
    }
    facts = rigs["safe"].view(sids["safe"])["evidence"]["facts"]
    assert facts["safe_number"] == block  # the tag, read at the node's head, covers it
    assert facts["finalized_number"] is None  # the safe rule does not ask for finalized


def test_a_tx_registered_after_its_blocks_passed_unwatched_is_decided_on_the_tags_at_once(
    start_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    # Nothing is watched while the chain passes the block and its tags reach it, so no
    # poll reads the tags; the tx is registered afterwards and the chain goes quiet. The
    # look-up that finds it reads the tags first: the verdict does not wait for a block
    # that may never come.
    anvil = start_anvil("--slots-in-an-epoch", "4")
    rigs = {
        mode: make_rig(anvil, confirmations=3, finality=mode, start=True, poll=True)
        for mode in MODES
    }
    anvil.mine(10)
    tx = anvil.send()
    block = wait_included(anvil, tx)
    _advance_to(anvil, rigs, block + 8)  # the finalized tag reaches the block, unread
    assert int(anvil.block("finalized")["number"], 16) == block
    sids = {mode: rig.register(tx).settlement_id for mode, rig in rigs.items()}
    for rig in rigs.values():
        rig.watcher.catch_up()  # no new block: the look-up decides
    assert {mode: rigs[mode].view(sids[mode])["verdict"] for mode in MODES} == dict.fromkeys(
        MODES, CONFIRMED
    )
    bases = {mode: rigs[mode].view(sids[mode])["evidence"]["kind"] for mode in MODES}
    assert bases["finalized"] == "finalized" and bases["safe"] == "safe"


def test_receipts_name_the_basis_and_the_tag_they_rest_on(
    start_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    anvil = start_anvil("--slots-in-an-epoch", "4")
    rigs, sids, block = _follow(anvil, make_rig)
    _advance_to(anvil, rigs, block + 8)
    for mode, tag in (("safe", "safe"), ("depth_and_finalized", "finalized")):
        issuer = receipts_for(rigs[mode])
        issuer.run(rigs[mode])
        receipt = issuer.latest(sids[mode])
        assert receipt["finality"]["basis"] == mode
        verified = verify_receipt(receipt)
        assert verified.summary().endswith(f"basis {mode}")
        [claim] = verified.claims
        assert f"node's {tag} block" in claim and "claim" in claim
        if mode == "depth_and_finalized":  # the depth part is proven: at least N headers
            assert verified.facts.confirmations is not None
            assert verified.facts.confirmations >= 3


def test_explicit_depth_on_an_l2_starts_with_a_warning_naming_the_risk(
    start_anvil: Callable[..., Anvil],
    make_rig: RigFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    anvil = start_anvil("--chain-id", "8453")  # Base's chain id: an OP Stack L2
    assert int(anvil.rpc("eth_chainId"), 16) == 8453
    with caplog.at_level(logging.WARNING, logger="finality.engine"):
        make_rig(anvil, chain_id=8453, confirmations=3, finality="depth", start=True, poll=True)
    [warning] = [r for r in caplog.records if "finality = 'depth' on base" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert "trusts the sequencer" in warning.getMessage()

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="finality.engine"):
        rig = make_rig(
            anvil, chain_id=8453, confirmations=3, finality="finalized", start=True, poll=True
        )
    assert rig.config.resolved_finality == "finalized"
    assert not [r for r in caplog.records if "finality =" in r.getMessage()]


def test_a_chain_whose_headers_do_not_rehash_gets_a_signed_attestation(
    start_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    # Avalanche's chain id: the registry says its headers do not re-hash (coreth's layout),
    # so the receipt carries no header chain, and says so, instead of a proof that fails.
    anvil = start_anvil("--chain-id", "43114", "--slots-in-an-epoch", "1")
    rig = make_rig(
        anvil, chain_id=43114, confirmations=3, finality="finalized", start=True, poll=True
    )
    tx = anvil.send()
    block = wait_included(anvil, tx)
    sid = rig.register(tx).settlement_id
    rig.mine_and_poll(2)
    assert rig.view(sid)["verdict"] == CONFIRMED
    issuer = receipts_for(rig)
    issuer.run(rig)
    receipt = issuer.latest(sid)
    assert receipt["attestation_only"] is True and receipt["proof"] is None
    assert receipt["attestation"]["block_number"] == block
    assert "extDataHash" in receipt["attestation"]["reason"]

    verified = verify_receipt(receipt)
    assert verified.summary().startswith(
        "settlement_finality_receipt for " + tx.lower() + " on chain 43114: ATTESTATION ONLY"
    )
    assert any(c.startswith("no header chain was checked") for c in verified.claims)
    assert verified.anchor == (
        receipt["attestation"]["head_number"],
        receipt["attestation"]["head_hash"],
    )
    # The form is exact: an attestation that also claims a proof, or is not marked, fails.
    with pytest.raises(ReceiptInvalid, match="proof: an attestation carries no proof"):
        verify_receipt({**receipt, "proof": {"headers": []}})
    with pytest.raises(ReceiptInvalid, match="attestation_only: must be true"):
        verify_receipt({**receipt, "attestation_only": False})
    unsigned = body_of(receipt)
    with pytest.raises(ReceiptInvalid):
        verify_receipt({**unsigned, "digest": receipt["digest"], "signature": "0x" + "00" * 65})
