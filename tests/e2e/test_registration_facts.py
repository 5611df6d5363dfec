"""Registering with what the caller knows (sender and nonce, or the signed tx), over HTTP.

A real daemon and anvil: the facts are checked (raw_tx against tx_hash, the signer against
sender), a bad one is a 422 naming its field and stores nothing, a good one is stored and
the settlement reaches finality with a receipt like any other.
"""

from __future__ import annotations

from typing import Any

import pytest

from guard.hashing import keccak256
from tests.integration.receipts_helpers import TxFactory
from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon, wait_for

pytestmark = pytest.mark.anvil


def _post(daemon: Daemon, tx_hash: str, **fields: Any) -> tuple[int, dict[str, Any]]:
    answer = daemon.post("/v1/settlements", {"chain": CHAIN, "tx_hash": tx_hash, **fields})
    body: dict[str, Any] = answer.json()
    return answer.status_code, body


def _pending_facts(daemon: Daemon, settlement_id: str) -> list[tuple[str, int]]:
    """(sender, nonce) the timeline shows while the tx is pending."""
    steps = daemon.timeline(settlement_id)
    return [(s["sender"], s["nonce"]) for s in steps if s["step"] == "seen_pending"]


def test_bad_facts_are_a_422_naming_the_field_and_store_nothing(
    module_daemon: Daemon, module_anvil: Anvil
) -> None:
    factory = TxFactory(module_anvil)
    raw = factory.dynamic()
    tx_hash = "0x" + keccak256(raw).hex()
    other = "0x" + keccak256(factory.dynamic()).hex()
    cases: list[tuple[dict[str, Any], str, str, str]] = [
        ({"raw_tx": "0x" + raw.hex()}, other, "raw_tx", "hashes to"),
        ({"raw_tx": "0x02c0"}, tx_hash, "raw_tx", "not a signed transaction"),
        ({"sender": module_anvil.accounts[0]}, tx_hash, "nonce", "go together"),
        ({"nonce": 3}, tx_hash, "sender", "go together"),
        ({"sender": "0x1234", "nonce": 0}, tx_hash, "sender", "20-byte"),
        ({"raw_tx": "0x" + raw.hex(), "sender": module_anvil.accounts[1]}, tx_hash, "sender", ""),
        ({"raw_tx": "0x" + raw.hex(), "nonce": factory.nonce + 5}, tx_hash, "nonce", ""),
    ]
    for fields, hash_, field, words in cases:
        status, body = _post(module_daemon, hash_, **fields)
        assert status == 422, (fields, body)
        assert body["fields"] == [field], body
        assert body["error"].startswith(f"{field}: ") and words in body["error"], body
        assert module_daemon.settlements_of(hash_) == []


def test_a_tx_registered_with_its_signed_bytes_gets_its_receipt(
    module_daemon: Daemon, module_anvil: Anvil
) -> None:
    factory = TxFactory(module_anvil, account=2)
    raw = factory.dynamic()
    tx_hash = "0x" + keccak256(raw).hex()
    status, view = _post(module_daemon, tx_hash, raw_tx="0x" + raw.hex(), confirmations=2)
    assert status == 201, view
    assert _pending_facts(module_daemon, view["settlement_id"]) == [
        (module_anvil.accounts[2].lower(), factory.nonce - 1)
    ]
    factory.send(raw)
    module_anvil.mine(2)

    def signed() -> bool:  # a condition, polled: the daemon follows the chain on its own
        return bool(module_daemon.settlement(view["settlement_id"]).get("receipt_signed"))

    wait_for(signed, timeout=20, what="the signed receipt")
    final = module_daemon.settlement(view["settlement_id"])
    assert final["verdict"] == "FINALITY_CONFIRMED"
    assert final["receipt"]["kind"] == "settlement_finality_receipt"
