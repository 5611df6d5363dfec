"""Canonical JSON: one byte string per value, so digests and signatures are reproducible.

The encoding follows RFC 8785 for the values we allow: sorted object keys, no insignificant
white space, UTF-8, and **no floats** (a float has many spellings across languages; times
are integer milliseconds). Integers must be exact in an IEEE double (|n| <= 2**53 - 1), as
RFC 8785 requires, so JavaScript and others encode them identically: amounts beyond that
(wei) go as decimal strings. Keys are sorted by code point, which equals RFC 8785's UTF-16
order for the ASCII keys we use. ``bytes`` are written as 0x-prefixed lower-case hex.
Anything else raises :class:`CanonicalError`.
"""

import hashlib
import json
from collections.abc import Mapping, Sequence

from guard.errors import GuardError

MAX_SAFE_INTEGER = 2**53 - 1


class CanonicalError(GuardError, TypeError):
    """A value has no canonical JSON form (a float, a huge integer, an odd type)."""


JsonValue = None | bool | int | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"]


def _normalise(value: object, path: str) -> object:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise CanonicalError(
                f"{path}: integer {value} is beyond 2**53 - 1; encode it as a decimal string"
            )
        return value
    if isinstance(value, float):
        raise CanonicalError(f"{path}: floats are not allowed in canonical JSON ({value!r})")
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalError(f"{path}: object keys must be strings, got {key!r}")
            out[key] = _normalise(item, f"{path}.{key}")
        return out
    if isinstance(value, Sequence):
        return [_normalise(item, f"{path}[{i}]") for i, item in enumerate(value)]
    raise CanonicalError(f"{path}: {type(value).__name__} has no canonical JSON form")


def canonical_json(value: object) -> bytes:
    """Encode ``value`` as canonical JSON bytes; raises :class:`CanonicalError`."""
    normalised = _normalise(value, "$")
    text = json.dumps(normalised, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalError(f"$: string is not valid Unicode (lone surrogate): {exc}") from exc


def digest(value: object) -> str:
    """``sha256:`` + hex SHA-256 of the canonical JSON of ``value``."""
    return "sha256:" + hashlib.sha256(canonical_json(value)).hexdigest()
