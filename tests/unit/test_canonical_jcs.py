"""guard/canonical.py is RFC 8785 (JCS), byte for byte.

The oracle is the independent ``rfc8785`` package (PyPI, Trail of Bits); the examples are the
test data of the RFC's author (tests/vectors/jcs/, see its README) and the number samples of
that repository's README. An acceptance test found keys sorted by code point, which puts a key
in U+E000-U+FFFF before one above U+FFFF; RFC 8785 sorts by UTF-16 code units, where the
latter (a surrogate pair, 0xD800-0xDBFF) comes first, so such dependent state had a digest
no JCS library computes.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.canonical import CanonicalError, canonical_json, digest, ecmascript_number

JCS = Path(__file__).parents[1] / "vectors" / "jcs"

# Keys from every plane: ASCII, the private-use block U+E000-U+FFFF next to the
# supplementary planes (the two orders differ exactly there), never a lone surrogate.
_chars = st.characters(exclude_categories=["Cs"])
_edge_chars = st.sampled_from(["a", "\u0080", "\ue000", "\uffff", "\U00010000", "\U0010ffff"])
keys = st.text(_chars | _edge_chars, max_size=4)
strings = st.text(_chars, max_size=8)
safe_ints = st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1)
floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [1e21, 1e20, 9.999999999999999e20, -0.0, 0.0, 5e-324, -5e-324, 1e-6, 1e-7, 2.0**53, 1e300]
)


def json_values(number: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | safe_ints | strings | number
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5)
        ),
        max_leaves=20,
    )


@settings(max_examples=400, deadline=None)
@given(json_values(floats))
def test_any_json_value_encodes_as_rfc8785_does(value: Any) -> None:
    assert canonical_json(value, floats=True) == rfc8785.dumps(value)


@settings(max_examples=300, deadline=None)
@given(json_values(st.nothing()))
def test_float_free_values_encode_and_digest_as_rfc8785_does(value: Any) -> None:
    """What receipts and dependent state hold (no floats): the default encoder is JCS."""
    expected = rfc8785.dumps(value)
    assert canonical_json(value) == expected
    assert digest(value) == "sha256:" + hashlib.sha256(expected).hexdigest()


def test_keys_are_sorted_by_utf16_code_units_not_code_points() -> None:
    state = {"\ue000": "private use", "\U0001f600": "emoji", "z": "ascii"}
    expected = '{"z":"ascii","\U0001f600":"emoji","\ue000":"private use"}'.encode()
    assert canonical_json(state) == expected == rfc8785.dumps(state)


@pytest.mark.parametrize("name", ["arrays", "french", "structures", "unicode", "values", "weird"])
def test_rfc8785_author_examples(name: str) -> None:
    value = json.loads((JCS / "input" / f"{name}.json").read_text(encoding="utf-8"))
    expected = (JCS / "output" / f"{name}.json").read_bytes()
    assert canonical_json(value, floats=True) == expected


@pytest.mark.parametrize(
    ("ieee", "expected"),
    [  # the sample lines of cyberphone/json-canonicalization testdata/README.md
        ("4340000000000001", "9007199254740994"),
        ("4340000000000002", "9007199254740996"),
        ("444b1ae4d6e2ef50", "1e+21"),
        ("3eb0c6f7a0b5ed8d", "0.000001"),
        ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
        ("8000000000000000", "0"),
        ("0000000000000000", "0"),
        # and the edges the issue names, checked by hand against ECMA-262 Number::toString
        ("0000000000000001", "5e-324"),
        ("8000000000000001", "-5e-324"),
        ("7fefffffffffffff", "1.7976931348623157e+308"),
        ("444b1ae4d6e2ef4f", "999999999999999900000"),
        ("4330000000000000", "4503599627370496"),
    ],
)
def test_numbers_are_written_as_ecmascript_writes_them(ieee: str, expected: str) -> None:
    (value,) = struct.unpack(">d", bytes.fromhex(ieee))
    assert ecmascript_number(value) == expected
    assert canonical_json([value], floats=True) == f"[{expected}]".encode()
    assert rfc8785.dumps([value]) == f"[{expected}]".encode()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinities_have_no_form(value: float) -> None:
    with pytest.raises(CanonicalError, match=r"\$\.x: float"):
        canonical_json({"x": value}, floats=True)


def test_floats_stay_refused_unless_asked_for() -> None:
    """Receipts and dependent state keep their integer-only contract (the API answers 422)."""
    with pytest.raises(CanonicalError, match=r"\$\.amount: floats are not allowed"):
        canonical_json({"amount": 1.5})
    assert canonical_json({"amount": 1.5}, floats=True) == b'{"amount":1.5}'
