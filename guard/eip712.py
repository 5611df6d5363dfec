"""EIP-712 typed data for receipts: what the signer signs, so that a contract can check it.

A receipt is signed as the typed struct

    Receipt(string kind,uint256 chainId,bytes32 txHash,string settlementId,
            uint256 issuedAt,bytes32 bodyHash)

in the domain ``EIP712Domain(string name,string version)`` with name ``FinalityWatcher`` and
version ``1``. ``bodyHash`` is keccak256 of the receipt's canonical JSON body, so the
signature covers every field of the body while a contract needs only these six values and
``ecrecover`` to check who attested what about which transaction.

The hash is computed here without any EIP-712 library (the verifier stays readable and
small); a test checks it against eth-account's ``encode_typed_data`` on the same message.
"""

from __future__ import annotations

from typing import Any

from guard.hashing import keccak256

DOMAIN_NAME = "FinalityWatcher"
"""EIP-712 domain name."""
DOMAIN_VERSION = "1"
"""EIP-712 domain version (the receipt format version)."""
DOMAIN_TYPE = "EIP712Domain(string name,string version)"
RECEIPT_TYPE = (
    "Receipt(string kind,uint256 chainId,bytes32 txHash,string settlementId,"
    "uint256 issuedAt,bytes32 bodyHash)"
)

_DOMAIN_SEPARATOR = keccak256(
    keccak256(DOMAIN_TYPE.encode())
    + keccak256(DOMAIN_NAME.encode())
    + keccak256(DOMAIN_VERSION.encode())
)


def _uint256(value: int) -> bytes:
    return value.to_bytes(32, "big")


def signing_hash(
    kind: str, chain_id: int, tx_hash: bytes, settlement_id: str, issued_at: int, body_hash: bytes
) -> bytes:
    """The 32-byte EIP-712 digest a receipt's signature signs."""
    struct = keccak256(
        keccak256(RECEIPT_TYPE.encode())
        + keccak256(kind.encode())
        + _uint256(chain_id)
        + tx_hash
        + keccak256(settlement_id.encode())
        + _uint256(issued_at)
        + body_hash
    )
    return keccak256(b"\x19\x01" + _DOMAIN_SEPARATOR + struct)


def typed_data(
    kind: str, chain_id: int, tx_hash: str, settlement_id: str, issued_at: int, body_hash: str
) -> dict[str, Any]:
    """The same message as an EIP-712 JSON document (what wallets and eth-account sign)."""
    return {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "version", "type": "string"},
            ],
            "Receipt": [
                {"name": "kind", "type": "string"},
                {"name": "chainId", "type": "uint256"},
                {"name": "txHash", "type": "bytes32"},
                {"name": "settlementId", "type": "string"},
                {"name": "issuedAt", "type": "uint256"},
                {"name": "bodyHash", "type": "bytes32"},
            ],
        },
        "primaryType": "Receipt",
        "domain": {"name": DOMAIN_NAME, "version": DOMAIN_VERSION},
        "message": {
            "kind": kind,
            "chainId": chain_id,
            "txHash": tx_hash,
            "settlementId": settlement_id,
            "issuedAt": issued_at,
            "bodyHash": body_hash,
        },
    }
