"""Receipts of payments to an address, from the real engine's decisions on a real anvil,
checked offline (guard.verify, the client's offline verify and ``finality verify`` as a
process): native and ERC-20 payments (a real token compiled with solc, tests/support/erc20.py),
exact, split (two txs, and two logs of one receipt), from a given payer; a timeout that says
what was paid; and tampered receipts refused.

The engine counts (watcher/engine/payments*.py), the receipts issuer builds and signs
(watcher/receipts/payment.py) exactly as the daemon does after a poll; the clock is injected.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from guard.errors import ReceiptInvalid
from guard.payment import NATIVE, PaymentSpec
from guard.receipt_format import body_of
from guard.verify import verify_receipt
from tests.integration.receipts_helpers import Receipts, receipts_for
from tests.support.anvil import Anvil
from tests.support.daemon import run_cli
from tests.support.erc20 import Token, deploy_token
from tests.support.rigs import FakeClock, Rig, RigFactory
from watcher.client.offline import verify as client_verify
from watcher.engine.payment_registration import PaymentRegistration, new_payment
from watcher.receipts.payment import chain_builder
from watcher.store import SettlementRecord

pytestmark = pytest.mark.anvil
N = 3


@pytest.fixture
def rig(anvil: Anvil, make_rig: RigFactory) -> Rig:
    # The injected clock starts at the node's time, so a deadline falls among its blocks
    # (a timeout receipt then names the head at the deadline, and proves what was paid).
    start = int(anvil.block()["timestamp"], 16) * 1000
    r = make_rig(anvil, clock=FakeClock(start), confirmations=N)
    r.watcher.catch_up()
    return r


@pytest.fixture
def token(rig: Rig) -> Token:
    t = deploy_token(rig.anvil)
    t.mint(rig.anvil.accounts[1], 10**12)
    t.mint(rig.anvil.accounts[2], 10**12)
    rig.watcher.catch_up()
    return t


def issuer(rig: Rig) -> Receipts:
    """The daemon's receipts issuer over the rig, with the payment-aware chain builder."""
    receipts = receipts_for(rig)
    name = rig.config.name
    receipts.issuer.builders[name] = chain_builder(
        rig.config, rig.client, receipts.signer.address, rig.store
    )
    return receipts


def register(rig: Rig, to: str, asset: str, amount: int, **kw: Any) -> SettlementRecord:
    sender = kw.pop("sender", None)
    spec = PaymentSpec(to.lower(), asset.lower() if asset != NATIVE else NATIVE, amount, sender)
    head = rig.store.chain(rig.config.name)
    new, stored = new_payment(
        PaymentRegistration(chain=rig.config, spec=spec, **kw),
        rig.clock(),
        head.head_number if head else None,
    )
    rec, _ = rig.store.register_payment(new, stored)
    return rec


def pay_native(rig: Rig, sender: int, to: str, value: int) -> str:
    tx = {"from": rig.anvil.accounts[sender], "to": to, "value": hex(value)}
    tx_hash = str(rig.anvil.rpc("eth_sendTransaction", tx))
    rig.anvil.receipt(tx_hash)
    return tx_hash


def receipt_of(rig: Rig, rec: SettlementRecord, verdict: str) -> dict[str, Any]:
    """Mine to depth N, let the engine decide and the issuer sign; the stored receipt."""
    rig.mine_and_poll(N)
    assert rig.store.settlement(rec.settlement_id).verdict == verdict
    receipts = issuer(rig)
    receipts.run(rig)
    return receipts.latest(rec.settlement_id)


def finality_verify(receipt: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    return run_cli("verify", str(path), timeout=60)


def test_an_exact_native_payment_gets_a_receipt_proving_its_transfer(
    rig: Rig, tmp_path: Path
) -> None:
    to = rig.anvil.accounts[5]
    rec = register(rig, to, NATIVE, 10**15)
    tx = pay_native(rig, 1, to, 10**15)
    receipt = receipt_of(rig, rec, "FINALITY_CONFIRMED")
    assert receipt["kind"] == "settlement_finality_receipt"
    assert receipt["payment"]["kind"] == "evm_payment"
    assert [t["tx_hash"] for t in receipt["payment"]["transfers"]] == [tx]
    verified = verify_receipt(receipt)
    assert verified.facts.confirmations == N
    done = finality_verify(receipt, tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"transfer (proven): {10**15} from {rig.anvil.accounts[1].lower()}" in done.stdout


def test_a_split_token_payment_proves_each_log_two_of_them_in_one_receipt(
    rig: Rig, token: Token, tmp_path: Path
) -> None:
    to, other = rig.anvil.accounts[6], rig.anvil.accounts[7]
    rec = register(rig, to, token.address, 1_000)
    token.transfer(1, to, 300)
    rig.watcher.catch_up()
    token.transfer_many(2, [(other, 5), (to, 200), (to, 500)])  # logs 0 and 2 of one receipt
    receipt = receipt_of(rig, rec, "FINALITY_CONFIRMED")
    pay = receipt["payment"]
    assert [t["value"] for t in pay["transfers"]] == ["300", "200", "500"]
    assert [p["log_position"] for p in receipt["proof"]["transfers"]] == [0, 1, 2]
    verify_receipt(receipt)
    answer = client_verify(receipt, signers=[receipt["signer"]])
    assert answer.valid, answer.reason
    assert answer.as_json()["payment"]["paid"] == "1000"
    assert finality_verify(receipt, tmp_path).returncode == 0


def test_a_token_payment_from_a_given_payer_counts_only_its_transfers(
    rig: Rig, token: Token
) -> None:
    to = rig.anvil.accounts[6]
    payer = rig.anvil.accounts[2].lower()
    rec = register(rig, to, token.address, 700, sender=payer)
    token.transfer(1, to, 700)  # another payer: not counted
    token.transfer(2, to, 700)
    receipt = receipt_of(rig, rec, "FINALITY_CONFIRMED")
    assert [t["from"] for t in receipt["payment"]["transfers"]] == [payer]
    assert receipt["payment"]["from"] == payer
    verify_receipt(receipt)


def test_a_timeout_with_a_partial_payment_says_what_was_paid(rig: Rig, token: Token) -> None:
    to = rig.anvil.accounts[6]
    rec = register(rig, to, token.address, 1_000, timeout_s=30)
    token.transfer(1, to, 400)
    rig.mine_and_poll(N)
    rig.clock.advance(31)
    receipt = receipt_of(rig, rec, "TIMEOUT_TREATED_AS_FAILURE")
    assert receipt["kind"] == "async_settlement_timeout_signature"
    assert receipt["payment"]["paid"] == "400"
    assert receipt["payment"]["remaining"] == "600"
    assert len(receipt["proof"]["transfers"]) == 1  # what was paid is proven, not claimed
    verified = verify_receipt(receipt)
    assert "paid 400 of 1000" in verified.facts.summary
    assert "1 proven transfer(s)" in verified.facts.summary
    assert not any("paid 400" in claim for claim in verified.claims)
    body = copy.deepcopy(body_of(receipt))
    body["payment"]["transfers"][0]["value"] = "500"
    body["payment"]["paid"], body["payment"]["remaining"] = "500", "500"
    body["evidence"]["facts"]["paid"] = "500"
    with pytest.raises(ReceiptInvalid, match="is not the proven value 400"):
        verify_receipt(issuer(rig).signer.sign(body))


def test_a_timeout_before_any_transfer_names_the_terms(rig: Rig, token: Token) -> None:
    rec = register(rig, rig.anvil.accounts[6], token.address, 1_000, timeout_s=30)
    rig.clock.advance(31)
    receipt = receipt_of(rig, rec, "TIMEOUT_TREATED_AS_FAILURE")
    assert receipt["payment"]["paid"] == "0"
    assert receipt["payment"]["transfers"] == []
    assert "transfers" not in receipt["proof"]
    assert any("paid 0 of 1000" in claim for claim in verify_receipt(receipt).claims)


def test_tampered_payment_receipts_are_refused_offline_and_by_finality_verify(
    rig: Rig, token: Token, tmp_path: Path
) -> None:
    to = rig.anvil.accounts[6]
    rec = register(rig, to, token.address, 1_000)
    token.transfer(1, to, 400)
    rig.watcher.catch_up()
    token.transfer(2, to, 600)
    receipt = receipt_of(rig, rec, "FINALITY_CONFIRMED")
    signer = issuer(rig).signer

    def resigned(change: Any) -> dict[str, Any]:
        body = copy.deepcopy(body_of(receipt))
        change(body)
        return signer.sign(body)

    def more(body: dict[str, Any]) -> None:
        body["payment"]["transfers"][0]["value"] = "1400"
        body["payment"]["paid"] = "2000"

    def dropped(body: dict[str, Any]) -> None:
        body["payment"]["transfers"].pop()
        body["proof"]["transfers"].pop()
        body["payment"]["paid"] = "400"
        body["payment"]["remaining"] = "600"

    for change, reason in ((more, "is not the proven value"), (dropped, "below the amount")):
        tampered = resigned(change)
        with pytest.raises(ReceiptInvalid, match=reason):
            verify_receipt(tampered)
        done = finality_verify(tampered, tmp_path)
        assert done.returncode == 1
        assert reason in done.stderr + done.stdout


@pytest.mark.parametrize("asset", ["native", "token"])
def test_a_reorg_after_confirmation_revokes_the_receipt_and_the_new_branch_gets_one(
    rig: Rig, token: Token, asset: str
) -> None:
    to = rig.anvil.accounts[6]
    rec = register(rig, to, NATIVE if asset == "native" else token.address, 1_000)
    tx = pay_native(rig, 1, to, 1_000) if asset == "native" else token.transfer(1, to, 1_000)
    raw = rig.anvil.raw_tx(tx)
    receipts = issuer(rig)
    rig.mine_and_poll(N)
    receipts.run(rig)
    first = receipts.latest(rec.settlement_id)
    rig.anvil.reorg(N + 1, [(raw, 1)])  # the transfer's block and those above: tx re-included
    rig.mine_and_poll(1)
    receipts.run(rig)
    kept = receipts.store.for_settlements([rec.settlement_id])[rec.settlement_id]
    revocations = [r for r in kept if r.kind == "receipt_revocation"]
    assert [r.body["revokes"]["digest"] for r in revocations] == [first["digest"]]
    verify_receipt(revocations[0].body)
    rig.mine_and_poll(N)
    assert rig.store.settlement(rec.settlement_id).verdict == "FINALITY_CONFIRMED"
    receipts.run(rig)
    again = receipts.latest(rec.settlement_id)
    assert again["digest"] != first["digest"]
    moved = again["payment"]["transfers"][0]
    assert moved["tx_hash"] == tx
    assert moved["block_hash"] != first["payment"]["transfers"][0]["block_hash"]
    verify_receipt(again)
