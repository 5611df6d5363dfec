"""Keccak-256, the hash of Ethereum (not NIST SHA3-256: the padding differs).

Kept behind one function so that guard/ names its single cryptographic hash dependency once
(eth-hash, backed by pycryptodome: pure computation, no I/O).
"""

from eth_hash.auto import keccak as _keccak


def keccak256(data: bytes) -> bytes:
    """The 32-byte Keccak-256 digest of ``data``."""
    return bytes(_keccak(data))
