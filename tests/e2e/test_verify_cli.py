"""``finality verify`` on receipts served by a real daemon, against a real anvil.

The daemon signs with a key from ``FINALITY_SIGNING_KEY``; the receipts are fetched over
HTTP, written to files and checked by ``finality verify`` as separate processes: valid,
tampered, with the wrong ``--signer``, and with ``--rpc`` before and after a reorg that
removes the confirming head.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account

from tests.support.anvil import ROOT, Anvil
from tests.support.daemon import Daemon, run_cli, wait_for

pytestmark = pytest.mark.anvil

KEY = "0x8da4ef21b864d2cc526dbdb2a120bd2874c36c9d0a1fb7f8c63d7f7a8b41de8f"
SIGNER = Account.from_key(KEY).address.lower()


@pytest.fixture(scope="module")
def anvil(module_anvil: Anvil) -> Anvil:
    return module_anvil


@pytest.fixture(scope="module")
def daemon(anvil: Anvil, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FINALITY_SIGNING_KEY", KEY)
        daemon = Daemon(tmp_path_factory.mktemp("verify"), anvil.url, confirmations=2)
    yield daemon
    daemon.close()


def confirmed_receipt(daemon: Daemon, anvil: Anvil, **fields: Any) -> tuple[str, dict[str, Any]]:
    """Register a fresh tx, mine to finality; (settlement id, its signed receipt)."""
    tx = anvil.send()
    anvil.receipt(tx)
    view = daemon.register(tx, **fields)
    sid = view["settlement_id"]

    def final() -> bool:
        if daemon.settlement(sid)["verdict"] == "FINALITY_CONFIRMED":
            return True
        anvil.mine()
        return False

    wait_for(final, 15, interval=0.2, what="FINALITY_CONFIRMED")
    answer = daemon.get(f"/v1/settlements/{sid}/receipt")
    assert answer.status_code == 200, answer.text
    return sid, answer.json()


def verify(path: Path, *args: str, fresh: bool = False) -> subprocess.CompletedProcess[str]:
    """``finality verify PATH ARGS`` as a process (``fresh``: a plain interpreter, not a
    fork of the zygote)."""
    return run_cli("verify", str(path), *args, fresh=fresh)


def write(tmp_path: Path, name: str, receipt: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(receipt))
    return path


def test_served_receipt_verifies_offline_and_against_the_node(
    daemon: Daemon, anvil: Anvil, tmp_path: Path
) -> None:
    sid, receipt = confirmed_receipt(daemon, anvil, dependent_state={"order": "o-1"})
    assert receipt["kind"] == "settlement_finality_receipt"
    assert receipt["settlement_id"] == sid
    assert receipt["signer"] == SIGNER
    path = write(tmp_path, "receipt.json", receipt)

    done = verify(path, fresh=True)  # one check in a plain interpreter, the rest forked
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("valid: settlement_finality_receipt")
    assert "not checked against a trusted list" in done.stdout

    state = write(tmp_path, "state.json", {"order": "o-1"})
    done = verify(path, "--signer", SIGNER, "--rpc", anvil.url, "--dependent-state", str(state))
    assert done.returncode == 0, done.stderr
    head = receipt["proof"]["headers"][-1]
    assert f"rpc: block {int(head['number'], 16)} ({head['hash']}) is canonical" in done.stdout
    assert "dependent state: matches" in done.stdout

    other = write(tmp_path, "other-state.json", {"order": "o-2"})
    done = verify(path, "--dependent-state", str(other))
    assert done.returncode == 1
    assert "dependent state" in done.stderr


def test_tampered_receipt_and_wrong_signer_exit_1_with_the_reason(
    daemon: Daemon, anvil: Anvil, tmp_path: Path
) -> None:
    _, receipt = confirmed_receipt(daemon, anvil)
    headers = receipt["proof"]["headers"]
    headers[1]["parentHash"] = "0x" + "00" * 32
    done = verify(write(tmp_path, "tampered.json", receipt))
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    below = int(headers[0]["number"], 16)
    assert line == f"finality: invalid: header {below + 1}: parentHash does not match block {below}"

    _, receipt = confirmed_receipt(daemon, anvil)
    other = "0x" + "12" * 20
    done = verify(write(tmp_path, "good.json", receipt), "--signer", other)
    assert done.returncode == 1
    assert done.stderr.strip() == f"finality: invalid: signature: signer {SIGNER} is not trusted"


def test_unreadable_input_exits_64(tmp_path: Path) -> None:
    assert verify(tmp_path / "missing.json").returncode == 64
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    done = verify(bad)
    assert done.returncode == 64 and "not JSON" in done.stderr
    done = verify(write(tmp_path, "x.json", {}), "--signer", "0x12")
    assert done.returncode == 64 and "--signer" in done.stderr


def test_api_lists_receipts_signers_and_returns_the_binding(daemon: Daemon, anvil: Anvil) -> None:
    tx = anvil.send()
    view = daemon.register(tx, dependent_state={"sku": "X", "qty": 2})
    binding = view["binding"]
    assert binding["kind"] == "dependent_state_binding_receipt"
    assert binding["binding"]["dependent_state_digest"].startswith("sha256:")
    assert daemon.register(tx, dependent_state={"sku": "X", "qty": 2})["binding"] == binding

    signers = daemon.get("/v1/signers").json()
    assert signers[0] == {**signers[0], "address": SIGNER, "current": True, "source": "env"}

    sid, receipt = confirmed_receipt(daemon, anvil)
    listed = daemon.get(f"/v1/settlements/{sid}/receipts").json()
    assert [r["kind"] for r in listed] == ["settlement_finality_receipt"]
    assert listed[0]["receipt"] == receipt and listed[0]["revoked_by"] is None
    assert daemon.settlement(sid)["receipt"] == receipt
    floats = daemon.post(
        "/v1/settlements",
        {"chain": "local", "tx_hash": "0x" + "cd" * 32, "dependent_state": {"amount": 1.5}},
    )
    assert floats.status_code == 422 and "dependent_state.amount" in floats.json()["error"]


def test_rpc_check_fails_once_the_confirming_head_is_reorganised_away(
    start_anvil: Any, tmp_path: Path
) -> None:
    node = start_anvil()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FINALITY_SIGNING_KEY", KEY)
        daemon = Daemon(tmp_path / "d", node.url, confirmations=2)
    try:
        _, receipt = confirmed_receipt(daemon, node)
        path = write(tmp_path, "receipt.json", receipt)
        assert verify(path, "--rpc", node.url).returncode == 0
        head = int(receipt["proof"]["headers"][-1]["number"], 16)
        node.reorg(node.head() - head + 1)  # replaces the confirming head and all above
        done = verify(path, "--rpc", node.url)
        assert done.returncode == 1
        assert f"rpc: block {head} is 0x" in done.stderr
        assert "reorganised away" in done.stderr
        assert verify(path).returncode == 0  # offline, the receipt itself is still intact
    finally:
        daemon.close()


def test_run_without_a_key_on_a_real_chain_refuses_to_start(
    anvil: Anvil, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = Daemon(tmp_path, anvil.url, start=False, chain_id=8453)
    config.close()
    monkeypatch.delenv("FINALITY_SIGNING_KEY", raising=False)
    done = run_cli("run", "--config", str(config.config_path), timeout=60)
    assert done.returncode == 78, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("finality: signing: no signing key") and "local (8453)" in last


def hostile_files(tmp_path: Path) -> dict[str, Path]:
    """Receipt files anyone could send: real receipts made malformed, and texts no parser
    should trust (a payment proven in mainnet block 18,000,000; the golden vectors)."""
    from tests.unit.test_payment_proof import usdc_payment

    payment = usdc_payment()
    vector = json.loads((ROOT / "tests/vectors/receipts/finality_depth.json").read_text())
    final = vector["receipt"]
    files: dict[str, Path] = {}
    for name, value in (("null", None), ("text", "18000000"), ("list", [18_000_000])):
        changed = json.loads(json.dumps(payment))
        changed["evidence"]["facts"]["head_number"] = value
        files[f"head_number {name}"] = write(tmp_path, f"head-{name}.json", changed)
    changed = json.loads(json.dumps(payment))
    changed["evidence"]["facts"]["transfers"] = 7
    files["transfers a number"] = write(tmp_path, "transfers.json", changed)
    texts = {
        "head_number infinity": json.dumps(payment).replace(
            '"head_number": 18000000', '"head_number": Infinity'
        ),
        "lone surrogate": json.dumps(final).replace('"stl_', '"stl_\\ud800', 1),
        "nested 200000 deep": '{"evidence": ' + "[" * 200_000 + "]" * 200_000 + "}",
        "duplicate key": json.dumps(final).replace(
            '"verdict": ', '"verdict": "SETTLEMENT_FAILED", "verdict": ', 1
        ),
        "upper-case signature": json.dumps(
            {**final, "signature": "0x" + final["signature"][2:].upper()}
        ),
    }
    for i, (name, text) in enumerate(texts.items()):
        path = tmp_path / f"text-{i}.json"
        path.write_text(text)
        files[name] = path
    return files


def test_a_malformed_receipt_is_invalid_with_a_reason_never_a_traceback(tmp_path: Path) -> None:
    for name, path in hostile_files(tmp_path).items():
        done = verify(path)
        assert "Traceback" not in done.stderr, (name, done.stderr)
        assert done.returncode == 1, (name, done.stderr)
        [line] = done.stderr.strip().splitlines()
        assert line.startswith("finality: invalid: "), (name, line)


def test_rpc_of_another_chain_and_a_mistyped_signer_are_not_verdicts(
    anvil: Anvil, tmp_path: Path
) -> None:
    from tests.unit.test_payment_proof import usdc_payment  # mainnet: chain id 1

    path = write(tmp_path, "mainnet.json", usdc_payment())
    assert verify(path).returncode == 0
    done = verify(path, "--rpc", anvil.url)
    assert done.returncode == 3, done.stderr
    assert "serves chain id 31337, the receipt is for chain id 1" in done.stderr

    signer = usdc_payment()["signer"]
    checksummed = Account.from_key(bytes([0x42]) * 32).address
    assert checksummed.lower() == signer
    assert verify(path, "--signer", checksummed).returncode == 0
    typo = checksummed[:2] + checksummed[2:].swapcase()
    done = verify(path, "--signer", typo)
    assert done.returncode == 64
    assert done.stderr.strip().endswith(f"has a wrong EIP-55 checksum (expected {checksummed})")
