"""Typed reads of a receipt's JSON fields, each failing with a :class:`ReceiptInvalid` that
names the field's path (``finality.confirmations: must be an integer``).

The verifier reads untrusted JSON; these keep each check to one line and every message in
one form: ``PATH: what is wrong``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from guard.canonical import MAX_SAFE_INTEGER, CanonicalError, digest
from guard.errors import ReceiptInvalid

_HASH32 = re.compile(r"0x[0-9a-f]{64}")
_ADDRESS = re.compile(r"0x[0-9a-f]{40}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")

NOT_HEX = "must be 0x and lower-case hex of whole bytes"
"""What :func:`hex_bytes` says of a value that is not (one sentence for every hex field)."""


def path(where: str, key: str) -> str:
    """``where.key`` (or ``key`` at the top level)."""
    return f"{where}.{key}" if where else key


def obj(value: object, what: str) -> Mapping[str, Any]:
    """``value`` if it is a JSON object."""
    if not isinstance(value, Mapping):
        raise ReceiptInvalid(f"{what}: must be an object, got {type(value).__name__}")
    return value


def field(m: Mapping[str, Any], key: str, where: str) -> Any:
    """``m[key]``; a missing key is an error naming its path."""
    if key not in m:
        raise ReceiptInvalid(f"{path(where, key)}: is missing")
    return m[key]


def keys(m: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    """Refuse keys of ``m`` outside ``allowed`` (a receipt carries nothing unexplained)."""
    extra = sorted(set(m) - set(allowed))
    if extra:
        raise ReceiptInvalid(f"{path(where, extra[0])}: is not a field of this receipt")


def child(m: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    """The object at ``m[key]``."""
    return obj(field(m, key, where), path(where, key))


def text(m: Mapping[str, Any], key: str, where: str) -> str:
    """The non-empty string at ``m[key]``."""
    value = field(m, key, where)
    if not isinstance(value, str) or not value:
        raise ReceiptInvalid(f"{path(where, key)}: must be a non-empty string")
    return value


def integer(m: Mapping[str, Any], key: str, where: str, minimum: int = 0) -> int:
    """The integer at ``m[key]``, ``minimum`` <= n <= 2**53 - 1 (booleans are not integers)."""
    value = field(m, key, where)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ReceiptInvalid(f"{path(where, key)}: must be an integer")
    if not minimum <= value <= MAX_SAFE_INTEGER:
        raise ReceiptInvalid(f"{path(where, key)}: {value} is out of range (>= {minimum})")
    return value


def optional_integer(m: Mapping[str, Any], key: str, where: str) -> int | None:
    """An integer or null at ``m[key]``."""
    return None if field(m, key, where) is None else integer(m, key, where)


def hash32(m: Mapping[str, Any], key: str, where: str) -> str:
    """The 0x + 64 lower-case hex digits at ``m[key]``."""
    value = field(m, key, where)
    if not isinstance(value, str) or _HASH32.fullmatch(value) is None:
        raise ReceiptInvalid(f"{path(where, key)}: must be 0x and 64 lower-case hex digits")
    return value


def address(m: Mapping[str, Any], key: str, where: str) -> str:
    """The 0x + 40 lower-case hex digits at ``m[key]``."""
    value = field(m, key, where)
    if not isinstance(value, str) or _ADDRESS.fullmatch(value) is None:
        raise ReceiptInvalid(f"{path(where, key)}: must be 0x and 40 lower-case hex digits")
    return value


def digest_text(m: Mapping[str, Any], key: str, where: str, nullable: bool = False) -> str | None:
    """A ``sha256:`` + 64 hex digest at ``m[key]`` (or null when ``nullable``)."""
    value = field(m, key, where)
    if value is None and nullable:
        return None
    if not isinstance(value, str) or _DIGEST.fullmatch(value) is None:
        raise ReceiptInvalid(f"{path(where, key)}: must be sha256: and 64 lower-case hex digits")
    return value


def digest_of(m: Mapping[str, Any], key: str, where: str, value: object, what: str) -> str:
    """The digest at ``m[key]``, once shown to be the ``sha256:`` digest of ``value``'s
    canonical JSON (``what`` names ``value`` in the reasons)."""
    claimed = digest_text(m, key, where)
    try:
        actual = digest(value)
    except CanonicalError as exc:
        raise ReceiptInvalid(f"{what}: has no canonical JSON form: {exc}") from exc
    if claimed != actual:
        raise ReceiptInvalid(f"{path(where, key)}: {claimed} does not match the {what} ({actual})")
    return actual


def hex_bytes(value: object, what: str) -> bytes:
    """Bytes from 0x lower-case hex (whole bytes). Decoded, then written back (both in C): the
    text is that form exactly when ``bytes.hex`` gives its digits back (no upper case, none
    of the spaces ``fromhex`` skips). A receipt's proof nodes are long: a regular expression
    over them took ~8x as long, a third of the self-check of a receipt."""
    if isinstance(value, str) and value.startswith("0x"):
        digits = value[2:]
        try:
            data = bytes.fromhex(digits)
        except ValueError:
            data = None
        if data is not None and data.hex() == digits:
            return data
    raise ReceiptInvalid(f"{what}: {NOT_HEX}")


def hex_nodes(values: list[Any], name: Callable[[int], str]) -> list[bytes]:
    """Each item of ``values`` as :func:`hex_bytes`, a failure naming item ``i`` as
    ``name(i)`` (only written then: a receipt's proofs have many nodes)."""
    out: list[bytes] = []
    for i, value in enumerate(values):
        try:
            out.append(hex_bytes(value, ""))
        except ReceiptInvalid:
            raise ReceiptInvalid(f"{name(i)}: {NOT_HEX}") from None
    return out


def array(m: Mapping[str, Any], key: str, where: str, min_length: int = 0) -> list[Any]:
    """The JSON array at ``m[key]``."""
    value = field(m, key, where)
    if not isinstance(value, list):
        raise ReceiptInvalid(f"{path(where, key)}: must be an array")
    if len(value) < min_length:
        raise ReceiptInvalid(f"{path(where, key)}: needs at least {min_length} item(s)")
    return value


def strings(m: Mapping[str, Any], key: str, where: str, min_length: int = 0) -> list[str]:
    """A JSON array of non-empty strings at ``m[key]``."""
    values = array(m, key, where, min_length)
    if not all(isinstance(v, str) and v for v in values):
        raise ReceiptInvalid(f"{path(where, key)}: must hold non-empty strings")
    return values
