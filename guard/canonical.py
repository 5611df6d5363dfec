"""Canonical JSON: one byte string per value, so digests and signatures are reproducible.

The encoding follows RFC 8785 for the values we allow: object keys sorted by code point, no
insignificant white space, UTF-8, and **no floats** (a float has many spellings across
languages; times are integer milliseconds, amounts are integers or decimal strings).
``bytes`` are written as 0x-prefixed lower-case hex.
"""

import hashlib
import json
from collections.abc import Mapping, Sequence

JsonValue = None | bool | int | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"]


def _normalise(value: object, path: str) -> object:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        raise TypeError(f"{path}: floats are not allowed in canonical JSON ({value!r})")
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{path}: object keys must be strings, got {key!r}")
            out[key] = _normalise(item, f"{path}.{key}")
        return out
    if isinstance(value, Sequence):
        return [_normalise(item, f"{path}[{i}]") for i, item in enumerate(value)]
    raise TypeError(f"{path}: {type(value).__name__} has no canonical JSON form")


def canonical_json(value: object) -> bytes:
    """Encode ``value`` as canonical JSON bytes; raises ``TypeError`` on floats or odd types."""
    normalised = _normalise(value, "$")
    return json.dumps(
        normalised, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")


def digest(value: object) -> str:
    """``sha256:`` + hex SHA-256 of the canonical JSON of ``value``."""
    return "sha256:" + hashlib.sha256(canonical_json(value)).hexdigest()
