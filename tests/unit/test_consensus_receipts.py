"""A finality receipt's ``consensus`` section, checked with no trust in the signer's key.

Receipts of tests/vectors/receipts/ (built by the daemon's own code from anvil blocks) get a
consensus section from the test beacon chain (tests/support/beacon.py: known BLS keys, the
minimal preset) finalizing one of their blocks, and are signed again with a throwaway key;
``finality verify`` runs as a process: with ``--checkpoint`` it says the receipt's block is
finalized by consensus, without it says what it could not check, and it refuses a wrong
committee's signature, a tampered branch and a checkpoint that is not on the chain.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from guard.errors import ReceiptInvalid
from guard.receipts import body_of
from guard.verify import verify_receipt
from guard.verify_consensus import verify_consensus
from tests.support.beacon import BeaconSigner, execution_of
from tests.support.daemon import run_cli
from watcher.receipts.signer import Signer

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "receipts"
SIGNER = Signer(bytes.fromhex("11" * 32), "test")
BEACON = BeaconSigner()


def vector(name: str) -> dict[str, Any]:
    receipt: dict[str, Any] = json.loads((VECTORS / f"{name}.json").read_text())["receipt"]
    return receipt


def with_consensus(receipt: dict[str, Any], section: dict[str, Any]) -> dict[str, Any]:
    """The receipt's body with ``section``, signed again (by a key nobody needs to trust)."""
    body = {**body_of(receipt), "signer": SIGNER.address, "consensus": section}
    return SIGNER.sign(body)


def section_for(header: dict[str, Any], **update: Any) -> dict[str, Any]:
    """A consensus section finalizing ``header``'s block, signed in period 5 after a
    bootstrap in period 3 and the hand-overs of periods 3 and 4."""
    execution = execution_of(header)
    section = BEACON.chain(execution, [3, 4, 5], 5)
    if update:
        section["finality_update"] = BEACON.update(5, execution, with_committee=False, **update)
    return {**section, "link": {"kind": "headers", "headers": []}}


FINALIZED = vector("finality_finalized")
TOP = FINALIZED["proof"]["headers"][-1]
SECTION = section_for(TOP)
RECEIPT = with_consensus(FINALIZED, SECTION)
CHECKPOINT = SECTION["checkpoint"]


@pytest.fixture(scope="module")
def receipt_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("consensus") / "receipt.json"
    path.write_text(json.dumps(RECEIPT))
    return path


def write(tmp_path: Path, receipt: dict[str, Any]) -> str:
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    return str(path)


def test_verify_with_checkpoint_says_finalized_by_consensus(receipt_file: Path) -> None:
    done = run_cli("verify", str(receipt_file), "--checkpoint", CHECKPOINT)
    assert done.returncode == 0, done.stderr
    number = int(TOP["number"], 16)
    expected = (
        f"finalized by Ethereum consensus: 32/32 sync committee signatures, finalized slot 344, "
        f"execution block {number} ({TOP['hash']})"
    )
    assert expected in done.stdout.splitlines()
    assert "consensus network: minimal (not Ethereum mainnet)" in done.stdout.splitlines()
    assert "the section is not checked" not in done.stdout


def test_verify_without_checkpoint_says_what_it_could_not_check(receipt_file: Path) -> None:
    done = run_cli("verify", str(receipt_file))
    assert done.returncode == 0, done.stderr
    assert (
        "claim: consensus: the section is not checked without a checkpoint you trust "
        f"(finality verify --checkpoint 0x…); it starts from {CHECKPOINT}, the signer's word"
    ) in done.stdout.splitlines()
    assert "finalized by Ethereum consensus" not in done.stdout


def test_checkpoint_not_on_the_chain_is_refused(receipt_file: Path) -> None:
    other = BEACON.bootstrap(3 * 64 + 9, execution_of(TOP))[1]  # a root of another block
    done = run_cli("verify", str(receipt_file), "--checkpoint", other)
    assert done.returncode == 1
    assert done.stderr.strip().startswith("finality: invalid: consensus: checkpoint mismatch:")


def test_finality_update_signed_by_a_wrong_committee_is_refused(tmp_path: Path) -> None:
    forged = with_consensus(FINALIZED, section_for(TOP, signing_period=4))
    done = run_cli("verify", write(tmp_path, forged), "--checkpoint", CHECKPOINT)
    assert done.returncode == 1
    assert (
        "invalid: consensus: signature: finality update: not signed by period 5's committee"
        in done.stderr
    )


def test_tampered_finality_branch_is_refused(tmp_path: Path) -> None:
    section = copy.deepcopy(SECTION)
    branch = section["finality_update"]["data"]["finality_branch"]
    branch[2] = "0x" + "ab" * 32
    done = run_cli(
        "verify", write(tmp_path, with_consensus(FINALIZED, section)), "--checkpoint", CHECKPOINT
    )
    assert done.returncode == 1
    assert "invalid: consensus: finality branch:" in done.stderr


def test_a_checkpoint_that_is_not_a_root_is_a_usage_error(receipt_file: Path) -> None:
    done = run_cli("verify", str(receipt_file), "--checkpoint", "0x1234")
    assert done.returncode == 64
    assert "--checkpoint" in done.stderr


def test_a_receipt_without_consensus_is_not_proven_by_it(tmp_path: Path) -> None:
    done = run_cli("verify", write(tmp_path, FINALIZED), "--checkpoint", CHECKPOINT)
    assert done.returncode == 1
    assert "invalid: consensus: the receipt has no consensus section" in done.stderr


# ---------------------------------------------------------------- the link F -> B, in process


def test_the_section_is_part_of_the_signed_body() -> None:
    changed = copy.deepcopy(RECEIPT)
    changed["consensus"]["checkpoint"] = "0x" + "00" * 32
    with pytest.raises(ReceiptInvalid, match="digest"):
        verify_receipt(changed)


def test_finalized_block_above_the_headers_links_through_the_section() -> None:
    """F two blocks above the proof's top: the link carries the headers in between."""
    depth = vector("finality_depth")
    headers = depth["proof"]["headers"]
    body = body_of(depth)
    body["proof"] = {**body["proof"], "headers": headers[:1]}
    body["consensus"] = {
        **section_for(headers[2]),
        "link": {"kind": "headers", "headers": headers[1:]},
    }
    proven = verify_consensus(body, body["consensus"]["checkpoint"])
    assert proven.proven.execution_block_hash == headers[2]["hash"]
    assert proven.block_number == int(headers[0]["number"], 16)
    body["consensus"]["link"]["headers"] = headers[2:]  # a gap: block B+1 left out
    with pytest.raises(ReceiptInvalid, match="parentHash does not match"):
        verify_consensus(body, body["consensus"]["checkpoint"])


def test_finalized_block_not_linked_or_another_chain_is_refused() -> None:
    depth = vector("finality_depth")
    headers = depth["proof"]["headers"]
    body = body_of(depth)
    body["proof"] = {**body["proof"], "headers": headers[:1]}
    body["consensus"] = section_for(headers[2])  # no link: F is above the proof's headers
    with pytest.raises(ReceiptInvalid, match="not among the receipt's headers"):
        verify_consensus(body, body["consensus"]["checkpoint"])
    forged = {**headers[0], "hash": "0x" + "ee" * 32}  # consensus finalizes another block B
    body["consensus"] = section_for(forged)
    with pytest.raises(ReceiptInvalid, match="not the finalized one"):
        verify_consensus(body, body["consensus"]["checkpoint"])
