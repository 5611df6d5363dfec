"""What a receipt document may be made of, checked before the verifier reads any field.

Anyone can hand a verifier a file, so the verifier's first step is a boundary: the document
is plain JSON of the kinds a signed receipt can hold, or it is refused with a reason naming
where. Past this check every value is a ``dict`` with string keys, a ``list``, a ``str``
that is valid Unicode, an ``int`` within I-JSON's exact range, a ``bool`` or ``None``,
nested at most :data:`MAX_DEPTH` deep; the field readers (:mod:`guard.fields`) then only
have to check each field's type and form.

Why each rule:

* **no floats, no NaN or infinities, no integer beyond 2**53 - 1**: a receipt's canonical
  JSON (:mod:`guard.canonical`) has none, so a document holding one was never signed;
* **no lone surrogates**: a string without a UTF-8 form has no canonical bytes either;
* **bounded nesting**: the deepest receipt is a handful of levels; a document nested
  hundreds of thousands deep is an attack on the reader, not a receipt;
* **no duplicate keys** (:func:`parse_receipt`): two readers of one document must see one
  receipt; a parser that keeps the first value and one that keeps the last would not.

:func:`parse_receipt` reads a document's text (for a file or a string handed over);
:func:`check_plain_json` checks a value already parsed (the client's and MCP's mapping).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from itertools import accumulate
from typing import Any

from guard.canonical import MAX_SAFE_INTEGER
from guard.errors import ReceiptInvalid, ReceiptUnreadable
from guard.fields import path

MAX_DEPTH = 32
"""The deepest nesting of objects and arrays a receipt may have (the deepest built today
is four levels: ``evidence.facts.transfers[i]``)."""


def check_plain_json(value: object, what: str = "receipt") -> Mapping[str, Any]:
    """``value`` if it is a JSON object made only of what a receipt can hold (see the module
    doc); else :class:`ReceiptInvalid` naming the first offending place. Iterative: no
    nesting can exhaust the interpreter's stack."""
    if not isinstance(value, Mapping):
        raise ReceiptInvalid(f"{what}: must be a JSON object, got {type(value).__name__}")
    if _plain(value, 1):
        return value
    pending: list[tuple[object, str, int]] = [(value, "", 1)]
    while pending:
        item, where, depth = pending.pop()
        if isinstance(item, Mapping):
            children: list[tuple[object, str]] = []
            for key, child in item.items():
                if not isinstance(key, str):
                    raise ReceiptInvalid(f"{where or what}: has a key that is not a string")
                _check_text(key, f"{where or what}: a key")
                children.append((child, path(where, key)))
        elif isinstance(item, list):
            children = [(child, f"{where}[{i}]") for i, child in enumerate(item)]
        else:
            _check_scalar(item, where)
            continue
        if children and depth >= MAX_DEPTH:
            raise ReceiptInvalid(f"{where or what}: nested deeper than {MAX_DEPTH} levels")
        pending.extend((child, path, depth + 1) for child, path in children)
    return value


def _plain(item: object, depth: int) -> bool:
    """Whether ``item`` (at nesting ``depth``) passes every check of the walk below, on the
    common path: the exact JSON types, no place named, nothing built per value (the walk
    wrote a path for every value of every receipt: a third of a receipt's self-check). False
    leaves the verdict, and the name of the offending place, to the walk; it never accepts
    what the walk refuses. Recursive, but never deeper than :data:`MAX_DEPTH`."""
    if type(item) is str:
        return item.isascii() or _utf8(item)
    if type(item) is int:
        return -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER
    if item is None or type(item) is bool:
        return True
    if isinstance(item, dict):
        if item and depth >= MAX_DEPTH:
            return False
        return all(
            type(key) is str and (key.isascii() or _utf8(key)) and _plain(child, depth + 1)
            for key, child in item.items()
        )
    if type(item) is list:
        if item and depth >= MAX_DEPTH:
            return False
        return all(_plain(child, depth + 1) for child in item)
    return False


def _utf8(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form (no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_scalar(item: object, where: str) -> None:
    if item is None or isinstance(item, bool):
        return
    if isinstance(item, str):
        _check_text(item, where)
    elif isinstance(item, int):
        if abs(item) > MAX_SAFE_INTEGER:
            raise ReceiptInvalid(f"{where}: integer beyond 2**53 - 1 (no receipt holds one)")
    elif isinstance(item, float):
        raise ReceiptInvalid(f"{where}: {item!r} is not an integer (no receipt holds a float)")
    else:
        raise ReceiptInvalid(f"{where}: a {type(item).__name__} is not a JSON value")


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ReceiptInvalid(
            f"{where}: is not valid Unicode (a lone surrogate has no UTF-8 form)"
        ) from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object from its members, refusing a key given twice."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ReceiptInvalid(f"duplicate key {key!r} in one object (readers would disagree)")
        out[key] = value
    return out


def _no_constant(name: str) -> None:
    raise ReceiptInvalid(f"{name} is not a JSON number (no receipt holds one)")


_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _nesting(text: str) -> int:
    """How deep ``text``'s brackets nest, outside strings (before the parser sees it: its
    own guard is the recursion limit, which a host program may have raised far past what
    the C stack holds)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(1 if c in "[{" else -1 for c in brackets), default=0)


def parse_receipt(text: str | bytes, what: str = "receipt") -> Mapping[str, Any]:
    """The receipt document in ``text``, checked by :func:`check_plain_json`.

    :class:`ReceiptUnreadable` when ``text`` is not JSON at all (not UTF-8, a syntax error);
    :class:`ReceiptInvalid` when it is JSON but no receipt (a duplicate key, ``NaN``, too
    deep, a float...)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ReceiptUnreadable(f"{what}: is not UTF-8 text: {exc}") from None
    if _nesting(text) > MAX_DEPTH:
        raise ReceiptInvalid(f"{what}: nested deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except ReceiptInvalid as exc:
        raise ReceiptInvalid(f"{what}: {exc.reason}") from None
    except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
        raise ReceiptUnreadable(f"{what}: is not JSON: {exc}") from None
    return check_plain_json(value, what)
