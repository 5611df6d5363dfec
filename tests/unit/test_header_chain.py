"""The compact header chain (guard/header_chain.py) over real public-chain headers.

Test data nobody here wrote: two consecutive OP Sepolia headers (26207960, 26207961: op-rs/kona
@ cdb9be247e4178741d152e475e523883a31c4dbe, crates/proof/executor/testdata) and Ethereum
mainnet 18000000 (erigontech/rpc-tests @ 73992926bb41ecc29f9d48f4a93a8acddc3117ed), as
copied into tests/vectors/real-blocks/ with their provenance. The compact chain must give the
verifier the same blocks as ``proof.headers``, at well under half the size, and refuse every
form that is not the one canonical encoding.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from guard import rlp
from guard.errors import ReceiptInvalid
from guard.header_chain import FORMAT, decode_header_chain, encode_header_chain
from guard.headers import header_fields, header_json
from guard.verify_chain import proof_headers, verify_headers

REAL = Path(__file__).resolve().parents[1] / "vectors" / "real-blocks"


def _header(name: str) -> dict[str, str]:
    block: dict[str, Any] = json.loads((REAL / f"{name}.json").read_text())["block"]
    return header_json(block)


OP_PAIR = [_header("opsep-26207960"), _header("opsep-26207961")]


def test_real_linked_headers_decode_to_the_blocks_the_list_proves() -> None:
    compact = encode_header_chain(OP_PAIR)
    assert compact["format"] == FORMAT
    decoded = decode_header_chain(compact, "proof.header_chain")
    listed = verify_headers(list(OP_PAIR), "proof.headers")
    assert [(n, h) for n, h, _ in decoded] == [(n, h) for n, h, _ in listed]
    assert [h for _, h, _ in decoded] == [OP_PAIR[0]["hash"], OP_PAIR[1]["hash"]]
    for (_, _, ours), real in zip(decoded, OP_PAIR, strict=True):
        for name in ("parentHash", "transactionsRoot", "receiptsRoot", "number", "timestamp"):
            assert ours[name] == real[name]


def test_compact_is_about_half_the_size_of_the_list() -> None:
    listed = len(json.dumps(OP_PAIR, separators=(",", ":")))
    compact = len(json.dumps(encode_header_chain(OP_PAIR), separators=(",", ":")))
    assert listed / 2 > 1500  # JSON objects: ~1.55 KB a header
    assert compact / 2 < 800  # RLP in base64, no hash, no parent hash but the first
    assert compact < 0.52 * listed


def _chain_of(lists: list[list[rlp.Item]]) -> dict[str, str]:
    data = b"".join(rlp.encode(items) for items in lists)
    return {"format": FORMAT, "rlp": base64.b64encode(data).decode()}


def _fields(header: dict[str, str]) -> list[rlp.Item]:
    return list(header_fields(header))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda a, b: _chain_of([a, b]), "parentHash must be left empty"),
        (lambda a, b: _chain_of([a, [b"", *b[1:8], b"\x00" + b[8], *b[9:]]]), "leading zero"),
        (lambda a, b: _chain_of([a[:14]]), "15 to 23 fields"),
        (lambda a, b: _chain_of([[a[0][:31], *a[1:]]]), "parentHash must be 32 bytes"),
        (lambda a, b: {"format": "rlp-linked/2", "rlp": _chain_of([a])["rlp"]}, "is not"),
        (lambda a, b: {"format": FORMAT, "rlp": _chain_of([a])["rlp"].rstrip("=") + "A"}, "base64"),
        (lambda a, b: {**_chain_of([a]), "hash": "0x"}, "exactly format and rlp"),
        (
            lambda a, b: {"format": FORMAT, "rlp": base64.b64encode(rlp.encode(a)[:-3]).decode()},
            "cut short",
        ),
    ],
)
def test_every_non_canonical_chain_is_refused(build: Any, message: str) -> None:
    a, b = _fields(OP_PAIR[0]), _fields(OP_PAIR[1])
    with pytest.raises(ReceiptInvalid, match=message):
        decode_header_chain(build(a, b), "proof.header_chain")


def test_a_gap_in_numbers_is_refused() -> None:
    a = _fields(OP_PAIR[0])
    skip = [b"", *a[1:8], rlp.encode_uint(int(OP_PAIR[0]["number"], 16) + 2), *a[9:]]
    with pytest.raises(ReceiptInvalid, match="does not follow"):
        decode_header_chain(_chain_of([a, skip]), "proof.header_chain")


def test_a_proof_carries_one_header_encoding_never_both() -> None:
    proof = {"headers": list(OP_PAIR), "header_chain": encode_header_chain(OP_PAIR)}
    with pytest.raises(ReceiptInvalid, match="both headers and header_chain"):
        proof_headers(proof)
    assert [h for _, h, _ in proof_headers({"headers": list(OP_PAIR)})] == [
        h for _, h, _ in proof_headers({"header_chain": proof["header_chain"]})
    ]
