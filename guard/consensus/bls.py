"""BLS12-381 aggregate signatures of sync committees (``FastAggregateVerify``).

Arkworks' curve arithmetic (py-arkworks-bls12381, Rust) does the work; this module only
spells the IETF BLS signature scheme's proof-of-possession variant on top of it: public keys
in G1, signatures in G2, messages hashed to G2 with the ``POP`` ciphersuite's tag, and one
pairing check ``e(pk, H(m)) == e(g1, sig)``.

Decompressing a public key costs ~0.7 ms (the subgroup check), 512 of them ~380 ms. The beacon
state already holds the committee's aggregate key (proven with the committee by its branch),
so the aggregate of the signers is that key minus the few members that did not sign: a
verification decompresses the non-signers only (~40 ms for a full mainnet committee).
"""

from __future__ import annotations

from collections.abc import Sequence

from py_arkworks_bls12381 import GT, G1Point, G2Point

POP_DST = b"BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_"
"""The hash-to-curve tag of Ethereum's BLS signatures (proof-of-possession scheme)."""


def fast_aggregate_verify(
    aggregate_pubkey: bytes,
    pubkeys: Sequence[bytes],
    signed: Sequence[bool],
    message: bytes,
    signature: bytes,
) -> bool:
    """Whether ``signature`` is the aggregate signature over ``message`` of the members of a
    committee flagged in ``signed``; ``aggregate_pubkey`` is the sum of all ``pubkeys``."""
    try:
        key = G1Point.from_compressed_bytes(aggregate_pubkey)
        for pubkey, flag in zip(pubkeys, signed, strict=True):
            if not flag:
                key = key - G1Point.from_compressed_bytes(pubkey)
        point = G2Point.from_compressed_bytes(signature)
    except (ValueError, TypeError, OverflowError):
        return False
    if point.to_compressed_bytes() != signature:  # a non-canonical encoding (arkworks reads
        return False  # 0xff… as the point at infinity): the spec's decoders refuse it
    if key == G1Point.identity() or not any(signed):
        return False
    hashed = G2Point.hash_to_curve(message, POP_DST)
    return GT.pairing_check([key, -G1Point()], [hashed, point])
