"""Canonical JSON: one byte string per value, so digests and signatures are reproducible.

The encoding is RFC 8785, the JSON Canonicalization Scheme (JCS), so any JCS library
recomputes our digests:

* object members sorted by their keys as **UTF-16 code units** (RFC 8785 section 3.2.3),
  not by code point: the two orders differ once a key holds a character above U+FFFF
  (a surrogate pair, 0xD800-0xDBFF) and another one in U+E000-U+FFFF;
* no insignificant white space; strings as ``JSON.stringify`` writes them (only ``"``,
  ``\\`` and the controls below U+0020 escaped, ``\\b \\t \\n \\f \\r`` short, the others
  as ``\\u00xx``), then UTF-8; a lone surrogate has no UTF-8 form and is refused;
* numbers as ECMAScript writes a double (section 3.2.2.3): integers are exact only up to
  2**53 - 1 (I-JSON), so a larger one is refused: amounts beyond that (wei) go as decimal
  strings.

On top of JCS, :func:`canonical_json` refuses **floats** unless asked (``floats=True``): what
we sign (receipts, dependent state) holds integers only (times are integer milliseconds),
so a caller sending ``1.5`` learns at once rather than having it signed in a form it may
not expect. With ``floats=True`` any JSON value is accepted, written as RFC 8785 says
(``1e+21``, ``-0.0`` as ``0``, ``5e-324``). ``bytes`` are written as 0x-prefixed lower-case
hex. Anything else raises :class:`CanonicalError`.
"""

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal

from guard.errors import GuardError

MAX_SAFE_INTEGER = 2**53 - 1


class CanonicalError(GuardError, TypeError):
    """A value has no canonical JSON form (a float, a huge integer, an odd type)."""


JsonValue = None | bool | int | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"]


def _utf16(key: str) -> bytes:
    """The sort key of RFC 8785: the UTF-16 code units (big-endian bytes compare as units).
    A lone surrogate passes here and is refused when the output is encoded."""
    return key.encode("utf-16-be", "surrogatepass")


def ecmascript_number(value: float) -> str:
    """``value`` as ECMAScript's Number.prototype.toString writes it (ECMA-262, section
    Number::toString; RFC 8785 section 3.2.2.3): the shortest digits that read back as
    ``value``, plain from 1e-6 up to below 1e21, else ``d.ddde+N``. NaN and infinities have
    no JSON form (:class:`CanonicalError`)."""
    if math.isnan(value) or math.isinf(value):
        raise CanonicalError(f"{value!r} has no JSON form")
    if value == 0:
        return "0"  # -0.0 too
    sign = "-" if value < 0 else ""
    # repr() gives the shortest round-trip digits (the closest of them, as ECMAScript asks).
    shape = Decimal(repr(abs(value))).as_tuple()
    digits = "".join(map(str, shape.digits)).rstrip("0")
    exponent = int(shape.exponent) + len(shape.digits) - len(digits)
    k = len(digits)
    n = k + exponent  # value = 0.digits x 10**n
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        e = n - 1
        mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
        text = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + text


def _normalise(value: object, path: str, floats: bool, seen: list[bool]) -> object:
    """``value`` as plain JSON types, checked, objects rebuilt in RFC 8785 key order (so
    ``json.dumps`` writes it without sorting); ``seen[0]`` is set when a float is kept."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise CanonicalError(
                f"{path}: integer {value} is beyond 2**53 - 1; encode it as a decimal string"
            )
        return int(value)
    if isinstance(value, float):
        if not floats:
            raise CanonicalError(f"{path}: floats are not allowed in canonical JSON ({value!r})")
        if math.isnan(value) or math.isinf(value):
            raise CanonicalError(f"{path}: float {value!r} has no JSON form")
        seen[0] = True
        return float(value)
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str):
                raise CanonicalError(f"{path}: object keys must be strings, got {key!r}")
        return {
            key: _normalise(value[key], f"{path}.{key}", floats, seen)
            for key in sorted(value, key=_utf16)
        }
    if isinstance(value, Sequence):
        return [_normalise(item, f"{path}[{i}]", floats, seen) for i, item in enumerate(value)]
    raise CanonicalError(f"{path}: {type(value).__name__} has no canonical JSON form")


def _write(value: object, out: list[str]) -> None:
    """Write a normalised value holding floats (``json.dumps`` would write them as Python
    does, ``1e+16`` for ECMAScript's ``10000000000000000``)."""
    if isinstance(value, float):
        out.append(ecmascript_number(value))
    elif isinstance(value, dict):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            out.append(("," if i else "") + json.dumps(key, ensure_ascii=False) + ":")
            _write(item, out)
        out.append("}")
    elif isinstance(value, list):
        out.append("[")
        for i, item in enumerate(value):
            out.append("," if i else "")
            _write(item, out)
        out.append("]")
    else:
        out.append(json.dumps(value, ensure_ascii=False))


def canonical_json(value: object, *, floats: bool = False) -> bytes:
    """Encode ``value`` as RFC 8785 canonical JSON bytes; raises :class:`CanonicalError`
    (for any float unless ``floats``: see the module doc)."""
    seen = [False]
    normalised = _normalise(value, "$", floats, seen)
    if seen[0]:
        out: list[str] = []
        _write(normalised, out)
        text = "".join(out)
    else:
        text = json.dumps(normalised, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalError(f"$: string is not valid Unicode (lone surrogate): {exc}") from exc


def digest(value: object) -> str:
    """``sha256:`` + hex SHA-256 of the canonical JSON of ``value``."""
    return "sha256:" + hashlib.sha256(canonical_json(value)).hexdigest()
