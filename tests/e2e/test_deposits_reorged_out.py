"""A deposit taken back by a real reorg and not included again by its deadline, through the
daemon as a process on a real anvil: seen (``deposit_seen``), reorged out
(``deposit_reorged``, never final), then ``SETTLEMENT_FAILED`` with its reason, and a
signed ``settlement_failure_receipt`` served by ``GET /v1/settlements/{id}/receipt`` that
``finality verify`` accepts as a separate process and refuses once tampered (re-signed by
the daemon's own key, so only the content checks can refuse it).

The deadline is the chain's settlement timeout (a few seconds here): the test waits on the
verdict with a deadline while mining, it does not sleep.
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
from watcher.receipts.signer import Signer

pytestmark = pytest.mark.anvil

KEY = "0x5b1e4c2d3a9f8e7d6c5b4a39281706f5e4d3c2b1a0998877665544332211ffee"
SIGNER = Account.from_key(KEY).address.lower()
TIMEOUT_S = 4


@pytest.fixture(scope="module")
def daemon(module_anvil: Anvil, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FINALITY_SIGNING_KEY", KEY)
        daemon = Daemon(
            tmp_path_factory.mktemp("reorged-out"),
            module_anvil.url,
            confirmations=3,
            timeout_s=TIMEOUT_S,
        )
    yield daemon
    daemon.close()


def verify(tmp_path: Path, receipt: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    return run_cli("verify", str(path), "--signer", SIGNER)


def resigned(receipt: dict[str, Any], **changed: Any) -> dict[str, Any]:
    signed: dict[str, Any] = Signer(bytes.fromhex(KEY[2:]), "test").sign(
        {**body_of(receipt), **changed}
    )
    return signed


def test_a_deposit_reorged_out_and_not_included_again_fails_with_a_verifiable_receipt(
    daemon: Daemon, module_anvil: Anvil, tmp_path: Path
) -> None:
    anvil = module_anvil
    to = "0x" + f"{0xDE9051700D:040x}"
    answer = daemon.post(
        "/v1/subscriptions", {"chain": CHAIN, "addresses": [to], "assets": ["native"]}
    )
    assert answer.status_code == 201, answer.text
    sub = answer.json()["subscription_id"]
    daemon.wait_head(anvil.head())
    tx = str(
        anvil.rpc("eth_sendTransaction", {"from": anvil.accounts[2], "to": to, "value": "0x3e8"})
    )
    anvil.receipt(tx)
    seen_block = anvil.block("latest")

    def listed() -> dict[str, Any] | None:
        items = daemon.get(f"/v1/subscriptions/{sub}/deposits").json()["items"]
        return items[0] if items else None

    deposit = wait_for(listed, 20, interval=0.1, what="the deposit seen")
    did = deposit["settlement_id"]
    assert deposit["verdict"] == "AWAITING_FINALITY" and deposit["tx_hash"] == tx
    anvil.reorg(1)  # the block is replaced, its tx erased: never included again

    def failed() -> dict[str, Any] | None:
        anvil.mine()  # blocks past the deadline: the head at the deadline is then known
        view = daemon.settlement(did)
        assert view["verdict"] in ("AWAITING_FINALITY", "SETTLEMENT_FAILED"), view
        if view["verdict"] != "SETTLEMENT_FAILED":
            return None
        answer = daemon.get(f"/v1/settlements/{did}/receipt")
        return {"view": view, "receipt": answer.json()} if answer.status_code == 200 else None

    done = wait_for(failed, 40, interval=0.2, what=f"the failure receipt of {did}")
    view, receipt = done["view"], done["receipt"]
    assert "taken out by a reorg and not included again by the deadline" in view["directive"]
    kinds = [e["kind"] for e in daemon.get(f"/v1/settlements/{did}/events").json()]
    assert kinds.index("deposit_seen") < kinds.index("deposit_reorged")
    assert "deposit_confirmed" not in kinds
    failed_list = daemon.get(
        f"/v1/subscriptions/{sub}/deposits", params={"verdict": "SETTLEMENT_FAILED"}
    ).json()["items"]
    assert [d["settlement_id"] for d in failed_list] == [did]

    assert receipt["kind"] == "settlement_failure_receipt"
    assert receipt["verdict"] == "SETTLEMENT_FAILED"
    assert receipt["failure"]["reason"] == "reorged_out"
    seen = receipt["failure"]["transfer"]
    assert seen["tx_hash"] == tx and seen["value"] == "1000"
    assert seen["block_hash"] == seen_block["hash"]
    assert seen["from"] == anvil.accounts[2].lower()
    checked = verify(tmp_path, receipt)
    assert checked.returncode == 0, checked.stderr
    assert "reorged out" in checked.stdout
    assert f"is not {seen_block['hash']}" not in checked.stdout

    canonical = anvil.block(int(seen_block["number"], 16))["hash"]
    stayed = {**receipt["failure"], "transfer": {**seen, "block_hash": canonical}}
    refused = verify(tmp_path, resigned(receipt, failure=stayed))
    assert refused.returncode == 1
    assert "the transfer was not reorged out" in refused.stderr
    other = {**receipt["failure"], "transfer": {**seen, "value": "5000"}}
    refused = verify(tmp_path, resigned(receipt, failure=other))
    assert refused.returncode == 1
    assert "failure.transfer.value: '5000' is not the deposit's amount" in refused.stderr
