"""guard.hashing's Keccak-256 (safe-pysha3) against published digests and against a second,
independent implementation (eth-hash's pycryptodome backend, what web3 hashes with), over
every length around Keccak-256's 136-byte rate, where padding bugs live."""

from __future__ import annotations

import random

import pytest
from eth_hash.backends.pycryptodome import keccak256 as reference

from guard.hashing import keccak256

# Published digests: the empty string (Ethereum's well-known empty hash, e.g. the
# sha3Uncles of a block with no ommers is keccak of rlp([]): 0x1dcc4de8...) and "abc".
KNOWN = [
    (b"", "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"),
    (b"abc", "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"),
    (b"\xc0", "1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347"),
]


@pytest.mark.parametrize(("data", "hex_digest"), KNOWN)
def test_published_digests(data: bytes, hex_digest: str) -> None:
    assert keccak256(data).hex() == hex_digest


def test_agrees_with_pycryptodome_around_the_rate() -> None:
    rng = random.Random(11)
    for length in [*range(0, 300), 1_000, 4_096, 65_537]:
        data = rng.randbytes(length)
        assert keccak256(data) == reference(data), length


def test_answers_32_bytes() -> None:
    digest = keccak256(b"\x01\x02" * 100)
    assert type(digest) is bytes and len(digest) == 32
