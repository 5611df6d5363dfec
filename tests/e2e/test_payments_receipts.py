"""Payments to an address through a real daemon on a real anvil: registered with
``POST /v1/settlements`` (``kind: "evm_payment"``), paid with real transfers (native, and a
real ERC-20 compiled with solc: tests/support/erc20.py), their receipts fetched from
``GET /v1/settlements/{id}/receipt``, written to files and checked by ``finality verify``
as separate processes; a tampered one refused.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account

from guard.receipt_format import body_of
from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon, run_cli, wait_for
from tests.support.erc20 import Token, deploy_token
from watcher.receipts.signer import Signer

pytestmark = pytest.mark.anvil

KEY = "0x6c1ad4b2c8e5d0f8b3a9e7f5d2c4b6a8e0f1d3c5b7a9e2f4d6c8b0a1e3f5d7c9"
SIGNER = Account.from_key(KEY).address.lower()
N = 2


@pytest.fixture(scope="module")
def anvil(module_anvil: Anvil) -> Anvil:
    return module_anvil


@pytest.fixture(scope="module")
def daemon(anvil: Anvil, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FINALITY_SIGNING_KEY", KEY)
        daemon = Daemon(tmp_path_factory.mktemp("payments"), anvil.url, confirmations=N)
    yield daemon
    daemon.close()


@pytest.fixture(scope="module")
def token(anvil: Anvil) -> Token:
    t = deploy_token(anvil)
    t.mint(anvil.accounts[1], 10**12)
    return t


def register(daemon: Daemon, to: str, asset: str, amount: int, **extra: Any) -> str:
    body = {"kind": "evm_payment", "chain": CHAIN, "to": to, "asset": asset, "amount": str(amount)}
    answer = daemon.post("/v1/settlements", {**body, **extra})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["settlement_id"])


def pay_native(anvil: Anvil, to: str, value: int) -> str:
    tx = str(
        anvil.rpc("eth_sendTransaction", {"from": anvil.accounts[1], "to": to, "value": hex(value)})
    )
    anvil.receipt(tx)
    return tx


def final_receipt(daemon: Daemon, anvil: Anvil, sid: str) -> dict[str, Any]:
    """Mine until the payment is confirmed and its receipt is served."""

    def served() -> dict[str, Any] | None:
        if daemon.settlement(sid)["verdict"] != "FINALITY_CONFIRMED":
            anvil.mine()
            return None
        answer = daemon.get(f"/v1/settlements/{sid}/receipt")
        return answer.json() if answer.status_code == 200 else None

    return wait_for(served, 30, interval=0.2, what=f"the finality receipt of {sid}")


def verify(tmp_path: Path, receipt: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    return run_cli("verify", str(path), *args)


def fresh_address(seed: int) -> str:
    return "0x" + f"{seed:040x}"


def test_an_exact_native_payment_is_served_with_a_receipt_finality_verify_accepts(
    daemon: Daemon, anvil: Anvil, tmp_path: Path
) -> None:
    to = fresh_address(0xA11CE)
    sid = register(daemon, to, "native", 10**15)
    tx = pay_native(anvil, to, 10**15)
    receipt = final_receipt(daemon, anvil, sid)
    assert receipt["signer"] == SIGNER
    assert receipt["payment"]["transfers"][0]["tx_hash"] == tx
    done = verify(tmp_path, receipt, "--signer", SIGNER, "--rpc", anvil.url)
    assert done.returncode == 0, done.stderr
    assert f"payment: {10**15} wei to {to}" in done.stdout
    assert f"transfer (proven): {10**15} from {anvil.accounts[1].lower()} in tx {tx}" in done.stdout


def test_a_split_native_payment_proves_both_transfers(
    daemon: Daemon, anvil: Anvil, tmp_path: Path
) -> None:
    to = fresh_address(0xB0B)
    sid = register(daemon, to, "native", 1_000)
    txs = [pay_native(anvil, to, 400), pay_native(anvil, to, 600)]
    receipt = final_receipt(daemon, anvil, sid)
    assert [t["tx_hash"] for t in receipt["payment"]["transfers"]] == txs
    assert verify(tmp_path, receipt, "--signer", SIGNER).returncode == 0


@pytest.mark.parametrize("split", [False, True], ids=["exact", "split"])
def test_token_payments_are_proven_log_by_log(
    daemon: Daemon, anvil: Anvil, token: Token, tmp_path: Path, split: bool
) -> None:
    to = fresh_address(0xC0FFEE + split)
    sid = register(daemon, to, token.address, 1_000)  # EIP-55, as users paste it
    if split:
        token.transfer(1, to, 250)
        token.transfer_many(1, [(to, 250), (fresh_address(0xD00D), 9), (to, 500)])
    else:
        token.transfer(1, to, 1_000)
    receipt = final_receipt(daemon, anvil, sid)
    values = [t["value"] for t in receipt["payment"]["transfers"]]
    assert values == (["250", "250", "500"] if split else ["1000"])
    assert receipt["payment"]["asset"] == token.address.lower()
    done = verify(tmp_path, receipt, "--signer", SIGNER, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["payment"]["paid"] == "1000"


def test_a_tampered_payment_receipt_is_refused_by_finality_verify(
    daemon: Daemon, anvil: Anvil, tmp_path: Path
) -> None:
    to = fresh_address(0xE11E)
    sid = register(daemon, to, "native", 5_000)
    pay_native(anvil, to, 5_000)
    receipt = final_receipt(daemon, anvil, sid)
    body = body_of(receipt)
    body["payment"]["transfers"][0]["value"] = "50000"
    body["payment"]["paid"] = "50000"
    done = verify(tmp_path, Signer(bytes.fromhex(KEY[2:]), "test").sign(body), "--signer", SIGNER)
    assert done.returncode == 1  # signed by the daemon's own key, and still refused
    assert "payment.transfers[0].value: 50000 is not the proven value 5000" in done.stderr


def test_a_partial_payment_times_out_with_a_receipt_proving_what_was_paid(
    daemon: Daemon, anvil: Anvil, token: Token, tmp_path: Path
) -> None:
    to = fresh_address(0xF00)
    sid = register(daemon, to, token.address, 1_000, timeout_s=1)
    tx = token.transfer(1, to, 400)

    def timed_out() -> dict[str, Any] | None:
        anvil.mine()  # blocks after the deadline: the head at the deadline is then known
        if daemon.settlement(sid)["verdict"] != "TIMEOUT_TREATED_AS_FAILURE":
            return None
        answer = daemon.get(f"/v1/settlements/{sid}/receipt")
        return answer.json() if answer.status_code == 200 else None

    receipt = wait_for(timed_out, 30, interval=0.2, what=f"the timeout receipt of {sid}")
    assert receipt["kind"] == "async_settlement_timeout_signature"
    assert receipt["payment"]["paid"] == "400"
    assert receipt["payment"]["remaining"] == "600"
    done = verify(tmp_path, receipt, "--signer", SIGNER)
    assert done.returncode == 0, done.stderr
    assert f"transfer (proven): 400 from {anvil.accounts[1].lower()} in tx {tx}" in done.stdout
