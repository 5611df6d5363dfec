"""Bounds of the integer parameters (ids, cursors): what the store's 64-bit columns hold.

A larger value can name nothing; checking it at the edge answers 422 naming the parameter
instead of letting the database overflow (a 500)."""

from __future__ import annotations

import re

from pydantic import BeforeValidator

MAX_ID = 2**63 - 1
"""Largest row id / ``after`` cursor (a signed 64-bit integer)."""


def _decimal_text(value: object) -> object:
    """A query string's integer spelled as plain decimal digits: pydantic's lax parse also
    takes ``1_0``, ``+10`` and surrounding spaces, which no client means to send (and a
    cache or a log would treat as a value other than ``10``)."""
    if isinstance(value, str) and _DIGITS.fullmatch(value) is None:
        raise ValueError("must be a decimal integer (digits only, e.g. 10)")
    return value


_DIGITS = re.compile(r"-?[0-9]+")

DIGITS_ONLY = BeforeValidator(_decimal_text)
"""Last in an integer query or path parameter's ``Annotated`` (after ``Query``/``Path``,
whose bounds /openapi.json documents only then): digits only (:func:`_decimal_text`)."""

CURSOR = r"^[0-9]{1,18}$"
"""What a listing's cursor looks like (the ``seq`` of a page's last row, as digits)."""
