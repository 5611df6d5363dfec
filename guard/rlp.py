"""Recursive Length Prefix (RLP): the byte encoding Ethereum hashes headers, txs and trie nodes in.

An RLP *item* is a byte string or a list of items. The encoding (Ethereum yellow paper,
appendix B) prefixes each with its length:

============================  ===========================================================
one byte below 0x80           itself
string of 0..55 bytes         0x80 + length, then the bytes
longer string                 0xb7 + length of the length, the length (big-endian), bytes
list, payload 0..55 bytes     0xc0 + length, then the concatenated encoded items
longer list                   0xf7 + length of the length, the length, the payload
============================  ===========================================================

:func:`decode` is strict: every value has exactly one encoding, so it refuses a single byte
below 0x80 wrapped as a string, lengths with leading zeros, a long form where the short one
fits, and trailing bytes. Without that, two different proofs could carry the same meaning.
Integers are big-endian without leading zero bytes; zero is the empty string.
"""

from __future__ import annotations

from collections.abc import Sequence

from guard.errors import GuardError

Item = bytes | Sequence["Item"]
"""What RLP encodes: a byte string, or a (nested) list of them."""


class RlpError(GuardError, ValueError):
    """Bytes that are not the one canonical RLP encoding of an item."""


def encode(item: Item) -> bytes:
    """The RLP encoding of ``item``."""
    if isinstance(item, bytes | bytearray):
        length = len(item)
        if length == 1 and item[0] < 0x80:
            return bytes(item)
        if length < 56:
            return bytes((0x80 + length,)) + item
        return _length_prefix(length, 0x80) + item
    payload = b"".join([encode(child) for child in item])
    return _length_prefix(len(payload), 0xC0) + payload


def _length_prefix(length: int, offset: int) -> bytes:
    if length < 56:
        return bytes([offset + length])
    size = encode_uint(length)
    return bytes([offset + 55 + len(size)]) + size


def encode_uint(value: int) -> bytes:
    """``value`` as big-endian bytes without leading zeros (0 is ``b""``)."""
    if value < 0:
        raise RlpError(f"cannot encode negative integer {value}")
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


def decode_uint(data: bytes, what: str = "integer") -> int:
    """Inverse of :func:`encode_uint`; refuses leading zero bytes."""
    if data[:1] == b"\x00":
        raise RlpError(f"{what} has a leading zero byte")
    return int.from_bytes(data, "big")


def decode(data: bytes) -> Item:
    """The item ``data`` encodes; :class:`RlpError` unless it is exactly one canonical item."""
    item, end = _decode_at(data, 0, len(data))
    if end != len(data):
        raise RlpError(f"{len(data) - end} trailing byte(s) after the item")
    return item


def _decode_at(data: bytes, pos: int, limit: int) -> tuple[Item, int]:
    """Decode the item starting at ``pos`` and ending by ``limit`` (the end of the list it
    sits in: bounds are passed, not sliced, so a list's children cost no copy of it); return
    it and the position after it."""
    if pos >= limit:
        raise RlpError("input ends where an item should start")
    prefix = data[pos]
    if prefix < 0x80:
        return data[pos : pos + 1], pos + 1
    if prefix < 0xC0:
        start, length = _span(data, pos, prefix, 0x80, limit)
        end = start + length
        if length == 1 and data[start] < 0x80:
            raise RlpError("a single byte below 0x80 must be encoded as itself")
        return data[start:end], end
    start, length = _span(data, pos, prefix, 0xC0, limit)
    end = start + length
    items: list[Item] = []
    cursor = start
    while cursor < end:
        child, cursor = _decode_at(data, cursor, end)
        items.append(child)
    return items, end


def _span(data: bytes, pos: int, prefix: int, offset: int, limit: int) -> tuple[int, int]:
    """(payload start, payload length) of the string or list whose prefix is at ``pos``,
    within ``data[:limit]``."""
    short = prefix - offset
    if short < 56:
        start, length = pos + 1, short
    else:
        size = short - 55
        if pos + 1 + size > limit:
            raise RlpError("input ends inside a length")
        raw = data[pos + 1 : pos + 1 + size]
        if raw[0] == 0:
            raise RlpError("length has a leading zero byte")
        start, length = pos + 1 + size, int.from_bytes(raw, "big")
        if length < 56:
            raise RlpError("long form used for a length below 56")
    if start + length > limit:
        raise RlpError(f"item of {length} bytes runs past the end of the input")
    return start, length
