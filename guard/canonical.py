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

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, NoReturn, TypeVar

from guard.errors import GuardError

MAX_SAFE_INTEGER = 2**53 - 1

_T = TypeVar("_T")

_encode_string = json.encoder.encode_basestring
"""A string as ``json.dumps(..., ensure_ascii=False)`` writes it (the same C function)."""
_V = TypeVar("_V", bound="str | int | bool | None")


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


class FrozenJson(dict[str, _V]):
    """A flat JSON object that never changes (string keys, scalar values), whose canonical
    text is computed once: a block's header objects go into every receipt of the block, and
    each receipt is encoded twice (signing, then the self-check), so re-encoding them was
    the largest share of a receipt's CPU. A ``dict`` to everything else (``json``, the
    store, ``==``); writes raise ``TypeError``; ``dict(frozen)`` is a plain, mutable copy."""

    __slots__ = ("_derived", "_text")

    def __init__(self, fields: Mapping[str, _V]) -> None:
        super().__init__(fields)
        for key, item in self.items():
            if type(key) is not str or not (item is None or type(item) in (str, int, bool)):
                raise TypeError(f"FrozenJson holds scalars under string keys, not {key!r}")
        self._text: str | None = None
        self._derived: dict[str, object] = {}

    def derived(self, name: str, compute: Callable[[Mapping[str, object]], _T]) -> _T:
        """``compute(self)``, remembered under ``name``: for pure functions of the content
        (a header's hash), which cannot change. A raise is not remembered."""
        if name not in self._derived:
            self._derived[name] = compute(self)
        return self._derived[name]  # type: ignore[return-value]

    def canonical_text(self) -> str:
        """The canonical JSON text, computed on first use (the content cannot change);
        raises :class:`_Slow` when the fast writer cannot write it (the caller's general
        path then encodes it, and names the offending field with its full path)."""
        if self._text is None:
            out: list[str] = []
            _fast(dict(self), out)
            self._text = "".join(out)
        return self._text

    def _refuse(self, *_args: object, **_kw: object) -> NoReturn:
        raise TypeError("a FrozenJson cannot change: copy it with dict() first")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[type[FrozenJson[_V]], tuple[dict[str, _V]]]:
        return (FrozenJson, (dict(self),))


class _Slow(Exception):
    """The fast writer met something it leaves to the general path (a float, a big integer,
    a non-ASCII key, a type other than the plain JSON ones)."""


def _fast(value: Any, out: list[str]) -> None:
    """Write the canonical JSON of a value made of the plain JSON types only (exact ``dict``,
    ``list``, ``str``, ``int``, ``bool``, ``None``, ASCII keys: code point order is UTF-16
    order there), splicing the cached text of each :class:`FrozenJson`; raises
    :class:`_Slow` for anything else, so :func:`_general` decides (the same bytes, or the
    same error with its path). One pass and no copy: a receipt is encoded twice per
    signature (sign, then the self-check), most of it its shared header chain."""
    kind = type(value)
    if kind is str:
        out.append(_encode_string(value))
    elif kind is dict:
        if not value:
            out.append("{}")
            return
        mapping: dict[Any, Any] = value
        sep = "{"
        for key in sorted(mapping):  # TypeError for mixed key types: the general path
            if type(key) is not str or not key.isascii():
                raise _Slow
            out.append(sep + _encode_string(key) + ":")
            _fast(mapping[key], out)
            sep = ","
        out.append("}")
    elif kind is FrozenJson:
        out.append(value.canonical_text())
    elif kind is list:
        items: list[Any] = value
        if not items:
            out.append("[]")
            return
        sep = "["
        for item in items:
            out.append(sep)
            _fast(item, out)
            sep = ","
        out.append("]")
    elif kind is int:
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise _Slow
        out.append(int.__repr__(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    else:
        raise _Slow


def _general(value: object, floats: bool) -> str:
    """The general path: every value checked and normalised (with its path in an error)."""
    seen = [False]
    normalised = _normalise(value, "$", floats, seen)
    if seen[0]:
        out: list[str] = []
        _write(normalised, out)
        text = "".join(out)
    else:
        text = json.dumps(normalised, separators=(",", ":"), ensure_ascii=False)
    return text


def _text(value: object, floats: bool) -> str:
    out: list[str] = []
    try:
        _fast(value, out)
    except (_Slow, TypeError):
        return _general(value, floats)
    return "".join(out)


def canonical_json(value: object, *, floats: bool = False) -> bytes:
    """Encode ``value`` as RFC 8785 canonical JSON bytes; raises :class:`CanonicalError`
    (for any float unless ``floats``: see the module doc)."""
    text = _text(value, floats)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalError(f"$: string is not valid Unicode (lone surrogate): {exc}") from exc


def json_key(value: object) -> bytes | None:
    """A key that two values share exactly when they are the same JSON, types included
    (``True`` is not ``1``, an array is an exact ``list``): SHA-256 of their canonical text.
    For memos of pure checks over a receipt's parts (guard/verify_chain.py): the text is what
    a digest is computed over anyway, written by the fast C-backed writer, and a
    :class:`FrozenJson` part brings its text ready. None for anything the fast writer leaves
    to the general path (a float, a big integer, a non-ASCII key, a tuple, another mapping):
    such a value is simply checked every time."""
    out: list[str] = []
    try:
        _fast(value, out)
    except (_Slow, TypeError):
        return None
    return hashlib.sha256("".join(out).encode("utf-8", "surrogatepass")).digest()


def digest(value: object) -> str:
    """``sha256:`` + hex SHA-256 of the canonical JSON of ``value``."""
    return "sha256:" + hashlib.sha256(canonical_json(value)).hexdigest()
