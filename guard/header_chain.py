"""The compact header chain: ``proof.header_chain``, a versioned encoding beside
``proof.headers``.

``proof.headers`` (a list of JSON header objects) costs about 1.6 KB per header: hex doubles
every byte, each field carries its name, and every header repeats its parent's hash and its
own. A receipt for N = 600 (Base) carries 600 headers. The compact chain carries exactly
what the offline check needs and nothing it can recompute:

``{"format": "rlp-linked/1", "rlp": BASE64}`` where the bytes are the headers' consensus
RLP lists (:func:`guard.headers.header_fields`), inclusion block first, back to back, with
``parentHash`` left empty (``0x80``) in every header but the first: it is the hash of the
header before, which the verifier computes anyway. No ``hash`` is carried; each is
keccak256 of the list with its parent filled in, so the link is proven by construction.

What a verifier gets is the same as from ``proof.headers``: (number, hash, header) per
block, the header giving the roots the trie proofs are checked against. Decoding is strict:
canonical RLP (guard/rlp.py), canonical base64, the fixed sizes of the fifteen consensus
fields, quantities without leading zeros, consecutive numbers. A receipt carries either
``headers`` or ``header_chain``, never both.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from guard import rlp
from guard.canonical import FrozenJson
from guard.errors import ReceiptInvalid
from guard.hashing import keccak256
from guard.headers import ADDRESS, BLOOM, HASH32, NONCE, QUANTITY, REQUIRED_FIELDS, header_fields

FORMAT = "rlp-linked/1"
"""The only format this version writes and reads."""

MAX_FIELDS = len(REQUIRED_FIELDS) + 8
"""Most fields a header list may have (the fork-added ones, with room for a few more)."""

_SIZES = {HASH32: 32, ADDRESS: 20, BLOOM: 256, NONCE: 8}


def encode_header_chain(headers: Sequence[Mapping[str, object]]) -> dict[str, str]:
    """The ``header_chain`` object of header objects (each the parent of the next)."""
    out = bytearray()
    for i, header in enumerate(headers):
        fields: list[rlp.Item] = list(header_fields(header))
        if i:
            fields[0] = b""
        out += rlp.encode(fields)
    return {"format": FORMAT, "rlp": base64.b64encode(bytes(out)).decode("ascii")}


def one_header_chain(header: Mapping[str, object]) -> dict[str, str]:
    """The ``header_chain`` object of ``header`` alone (a history proof's block H, or the
    inclusion block of a receipt whose ancestry is a history proof). A block's frozen header
    object (guard/canonical.FrozenJson) goes into every receipt of the block: its encoding is
    kept on it and computed once; a fresh dict is returned each time (the caller's to change)."""
    if type(header) is FrozenJson:
        return dict(header.derived("header_chain", lambda h: encode_header_chain([h])))
    return encode_header_chain([header])


def _split(data: bytes, where: str) -> list[bytes]:
    """The back-to-back RLP lists of ``data``, each whole (decoded strictly later)."""
    out: list[bytes] = []
    pos = 0
    while pos < len(data):
        first = data[pos]
        if 0xC0 <= first <= 0xF7:
            size = 1 + first - 0xC0
        elif first > 0xF7:
            width = first - 0xF7
            size = 1 + width + int.from_bytes(data[pos + 1 : pos + 1 + width], "big")
        else:
            raise ReceiptInvalid(f"{where}: header {len(out)} is not an RLP list")
        if pos + size > len(data):
            raise ReceiptInvalid(f"{where}: header {len(out)} is cut short")
        out.append(data[pos : pos + size])
        pos += size
    return out


def _fields(encoded: bytes, index: int, where: str) -> list[bytes]:
    try:
        items = rlp.decode(encoded)
    except rlp.RlpError as exc:
        raise ReceiptInvalid(f"{where}: header {index}: {exc}") from exc
    if isinstance(items, bytes) or not len(REQUIRED_FIELDS) <= len(items) <= MAX_FIELDS:
        raise ReceiptInvalid(f"{where}: header {index} is not a list of 15 to 23 fields")
    fields: list[bytes] = []
    for item in items:
        if not isinstance(item, bytes):
            raise ReceiptInvalid(f"{where}: header {index}: a field is a list, not a string")
        fields.append(item)
    return fields


def _check(fields: list[bytes], index: int, where: str) -> None:
    for i, ((name, kind), value) in enumerate(zip(REQUIRED_FIELDS, fields, strict=False)):
        if i == 0 and index > 0:
            if value:
                raise ReceiptInvalid(
                    f"{where}: header {index}: parentHash must be left empty (it is the hash "
                    "of the header before)"
                )
            continue
        size = _SIZES.get(kind)
        if size is not None and len(value) != size:
            raise ReceiptInvalid(f"{where}: header {index}: {name} must be {size} bytes")
        if kind == QUANTITY and value[:1] == b"\x00":
            raise ReceiptInvalid(f"{where}: header {index}: {name} has a leading zero byte")


def decode_header_chain(
    value: Mapping[str, Any], where: str
) -> list[tuple[int, str, Mapping[str, Any]]]:
    """(number, hash, header) per block of a ``header_chain`` object, linked by
    construction; the header mapping holds the consensus fields by name (0x hex)."""
    if set(value) != {"format", "rlp"}:
        raise ReceiptInvalid(f"{where}: must hold exactly format and rlp")
    if value["format"] != FORMAT:
        raise ReceiptInvalid(f"{where}.format: {value['format']!r} is not {FORMAT!r}")
    text = value["rlp"]
    if not isinstance(text, str) or not text:
        raise ReceiptInvalid(f"{where}.rlp: must be a non-empty base64 string")
    try:
        data = base64.b64decode(text, validate=True)
    except ValueError as exc:  # binascii.Error is a ValueError
        raise ReceiptInvalid(f"{where}.rlp: not base64: {exc}") from exc
    if base64.b64encode(data).decode("ascii") != text:
        raise ReceiptInvalid(f"{where}.rlp: not canonical base64")
    out: list[tuple[int, str, Mapping[str, Any]]] = []
    for index, encoded in enumerate(_split(data, f"{where}.rlp")):
        fields = _fields(encoded, index, f"{where}.rlp")
        _check(fields, index, f"{where}.rlp")
        if index:
            fields[0] = bytes.fromhex(out[-1][1][2:])
        block_hash = "0x" + keccak256(rlp.encode(list(fields))).hex()
        number = int.from_bytes(fields[8], "big")
        if out and number != out[-1][0] + 1:
            raise ReceiptInvalid(f"header {number}: does not follow block {out[-1][0]}")
        header: dict[str, Any] = {
            name: hex(int.from_bytes(v, "big")) if kind == QUANTITY else "0x" + v.hex()
            for (name, kind), v in zip(REQUIRED_FIELDS, fields, strict=False)
        }
        header["hash"] = block_hash
        out.append((number, block_hash, header))
    if not out:
        raise ReceiptInvalid(f"{where}.rlp: holds no header")
    return out
