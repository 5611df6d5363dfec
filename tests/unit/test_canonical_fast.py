"""guard/canonical.py's fast writer and FrozenJson give the bytes of the general path.

Why: a receipt was encoded twice per signature, most of it its block's header chain;
the fast writer (plain JSON types in one pass) and the frozen headers (their text encoded
once) must not change one byte of what is signed, nor an error a caller sees.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.canonical import CanonicalError, FrozenJson, _general, canonical_json
from guard.headers import header_hash

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "receipts"

_keys = st.text(st.characters(exclude_categories=["Cs"]), max_size=4) | st.sampled_from(
    ["a", "\ue000", "\U00010000", "hash", "number"]
)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.text(max_size=6)
)
_frozen = st.dictionaries(
    _keys.filter(str.isascii), st.none() | st.booleans() | st.text(max_size=6), max_size=4
).map(FrozenJson)
values = st.recursive(
    _scalars | _frozen,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_keys, children, max_size=4),
    max_leaves=20,
)


def _old(value: Any) -> bytes | str:
    """What the general path alone gives: the bytes, or the error's message."""
    try:
        return _general(value, floats=False).encode("utf-8")
    except (CanonicalError, UnicodeEncodeError) as exc:
        return str(exc)


def _new(value: Any) -> bytes | str:
    try:
        return canonical_json(value)
    except CanonicalError as exc:
        return str(exc).replace("$: string is not valid Unicode (lone surrogate): ", "")


@settings(max_examples=500, deadline=None)
@given(values)
def test_the_fast_writer_gives_the_general_paths_bytes_and_errors(value: Any) -> None:
    old, new = _old(value), _new(value)
    if isinstance(old, bytes):
        assert new == old
    else:
        assert isinstance(new, str)
        assert new == old or old in new


def test_a_frozen_object_is_encoded_once_and_cannot_change() -> None:
    header = {"number": "0x10", "hash": "0x" + "ab" * 32, "parentHash": "0x" + "cd" * 32}
    frozen = FrozenJson(header)
    body = {"proof": {"headers": [frozen, frozen]}, "tx_index": 3}
    plain = {"proof": {"headers": [dict(header), dict(header)]}, "tx_index": 3}
    assert canonical_json(body) == canonical_json(plain) == canonical_json(plain)
    assert frozen == header and dict(frozen) == header
    writes: list[Callable[[], object]] = [
        lambda: frozen.__setitem__("number", "0x11"),
        lambda: frozen.update(number="0x11"),
        lambda: frozen.pop("number"),
        frozen.clear,
    ]
    for write in writes:
        with pytest.raises(TypeError):
            write()
    assert canonical_json(body) == canonical_json(plain)
    again = pickle.loads(pickle.dumps(frozen))
    assert type(again) is FrozenJson and again == header


def test_a_frozen_object_with_a_bad_value_names_it_with_its_full_path() -> None:
    body = {"proof": {"headers": [FrozenJson({"number": 2**60})]}}
    with pytest.raises(CanonicalError, match=r"\$\.proof\.headers\[0\]\.number: integer"):
        canonical_json(body)
    with pytest.raises(TypeError):
        FrozenJson({"nested": {"a": 1}})  # type: ignore[type-var]


def test_a_frozen_headers_hash_is_the_same_and_computed_once() -> None:
    vector = json.loads((VECTORS / "finality_depth.json").read_text())
    header = vector["receipt"]["proof"]["headers"][0]
    frozen = FrozenJson(header)
    assert header_hash(frozen) == header_hash(header) == header["hash"]
    assert frozen._derived["header_hash"] == header["hash"]
