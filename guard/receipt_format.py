"""The receipt format (version 1): its kinds, the fields every body starts with, and how a
body is sealed.

A receipt is one JSON object. All of it but the two trailer fields is the **body**; the
trailer is ``digest`` (``sha256:`` + SHA-256 of the body's canonical JSON, its stable id)
and ``signature`` (65 bytes r || s || v, EIP-712 over :mod:`guard.eip712`'s message, whose
``bodyHash`` is keccak256 of the same canonical JSON). This module is that contract; the
bodies of each kind are built in :mod:`guard.receipt_bodies` (chain settlements) and
:mod:`guard.receipt_offchain` (payment and job sources), and :mod:`guard.receipts` is the
one public name for all of it (see its docstring for the kinds).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guard import eip712
from guard.canonical import canonical_json, digest
from guard.hashing import keccak256
from guard.settlement import Verdict

FORMAT_VERSION = 1
"""The ``version`` of every receipt this code writes and the only one it verifies."""

FINALITY = "settlement_finality_receipt"
FAILURE = "settlement_failure_receipt"
TIMEOUT = "async_settlement_timeout_signature"
BINDING = "dependent_state_binding_receipt"
REVOCATION = "receipt_revocation"

DECISION_KINDS = (FINALITY, FAILURE, TIMEOUT)
"""Kinds that attest a terminal verdict (one current receipt per decision)."""
KINDS = (*DECISION_KINDS, BINDING, REVOCATION)
"""Every kind of receipt."""
TRAILER = ("digest", "signature")
"""The receipt's fields that are not part of the signed body."""

OFFCHAIN_CHAIN_ID = 0
"""The ``chain_id`` of every receipt about a source settlement (no chain id is 0)."""
OFFCHAIN_BOOKKEEPING = ("source", "source_kind", "ref", "event_ids", "objects", "objects_digest")
"""Evidence facts that are not the source's objects (used when the evidence has no
``objects`` map of its own: the remaining facts *are* the recorded objects)."""
VERDICT_KIND: dict[str, str] = {
    Verdict.FINALITY_CONFIRMED: FINALITY,
    Verdict.SETTLEMENT_FAILED: FAILURE,
    Verdict.TIMEOUT_TREATED_AS_FAILURE: TIMEOUT,
}
"""The receipt kind attesting each terminal verdict."""

FINALIZED_CLAIM = (
    "finalized_number is the claim of the observing node(s) (their `finalized` block tag), "
    "not proven by this receipt; the headers prove only the depth they cover"
)
"""The plain statement a receipt with basis ``finalized`` carries."""

SAFE_CLAIM = (
    "safe_number is the claim of the observing node(s) (their `safe` block tag), "
    "not proven by this receipt; the headers prove only the depth they cover"
)
"""The plain statement a receipt with basis ``safe`` carries."""

CLAIM_OF_BASIS = {
    "finalized": FINALIZED_CLAIM,
    "depth_and_finalized": FINALIZED_CLAIM,
    "safe": SAFE_CLAIM,
}
"""The statement each tag-based basis carries (``depth`` carries none: the headers prove it)."""


def body_of(receipt: Mapping[str, Any]) -> dict[str, Any]:
    """The signed part of a receipt: everything but the trailer."""
    return {k: v for k, v in receipt.items() if k not in TRAILER}


def body_digest(body: Mapping[str, Any]) -> str:
    """``sha256:``… of the body's canonical JSON: the receipt's id (revocations cite it)."""
    return digest(body)


def message_hash(body: Mapping[str, Any]) -> bytes:
    """The EIP-712 digest the signature signs (raises CanonicalError, KeyError, ValueError on
    a body without the common fields)."""
    return body_hashes(body)[1]


def body_hashes(body: Mapping[str, Any]) -> tuple[str, bytes]:
    """(the body's ``sha256:`` digest, the EIP-712 digest signed over it), from one pass of
    canonical encoding (the verifier needs both)."""
    data = canonical_json(body)
    signed = eip712.signing_hash(
        kind=str(body["kind"]),
        chain_id=int(body["chain_id"]),
        tx_hash=bytes.fromhex(str(body["tx_hash"])[2:]),
        settlement_id=str(body["settlement_id"]),
        issued_at=int(body["issued_at"]),
        body_hash=keccak256(data),
    )
    return "sha256:" + hashlib.sha256(data).hexdigest(), signed


def typed_data(body: Mapping[str, Any]) -> dict[str, Any]:
    """The EIP-712 JSON document of a body (for signers such as eth-account or a wallet)."""
    return eip712.typed_data(
        kind=str(body["kind"]),
        chain_id=int(body["chain_id"]),
        tx_hash=str(body["tx_hash"]),
        settlement_id=str(body["settlement_id"]),
        issued_at=int(body["issued_at"]),
        body_hash="0x" + keccak256(canonical_json(body)).hex(),
    )


def seal(body: Mapping[str, Any], signature: str) -> dict[str, Any]:
    """The receipt: ``body`` plus its digest and the signature (0x hex of 65 bytes)."""
    return {**body, "digest": body_digest(body), "signature": signature}


@dataclass(frozen=True)
class Subject:
    """Who the receipt is about and who signs it: the fields every body starts with."""

    settlement_id: str
    """The watcher's settlement id."""
    chain: str
    """The watcher's name for the chain."""
    chain_id: int
    """EIP-155 chain id."""
    tx_hash: str
    """The watched transaction (0x lower case)."""
    signer: str
    """0x lower-case address of the signing key."""

    def head(self, kind: str, issued_at: int) -> dict[str, Any]:
        """The common fields of a body of ``kind`` issued at ``issued_at`` (ms)."""
        return {
            "version": FORMAT_VERSION,
            "kind": kind,
            "settlement_id": self.settlement_id,
            "chain": self.chain,
            "chain_id": self.chain_id,
            "tx_hash": self.tx_hash,
            "issued_at": issued_at,
            "signer": self.signer,
        }
