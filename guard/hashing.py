"""Keccak-256, the hash of Ethereum (not NIST SHA3-256: the padding differs).

Kept behind one function so that guard/ names its single cryptographic hash dependency once:
safe-pysha3's C Keccak (pure computation, no I/O). A receipt's proofs and its offline check
hash every header and trie node they touch, so the per-call cost counts: through eth-hash's
pycryptodome backend a call cost ~10.5 us, here ~3.6 us for a 600-byte header (measured
side by side; ``tests/unit/test_hashing.py`` holds both to the same digests).
"""

from sha3 import keccak_256 as _keccak_256


def keccak256(data: bytes) -> bytes:
    """The 32-byte Keccak-256 digest of ``data``."""
    digest: bytes = _keccak_256(data).digest()
    return digest
