"""The pure checks behind the API's input bounds: how deep a JSON text nests (measured on the
bytes, before any parser recurses) and the depth, keys and UTF-8 of a parsed value. Strings
that hold brackets, escaped quotes and escaped backslashes must not fool the byte count."""

from __future__ import annotations

import json

import pytest

from watcher.api.body_limit import MAX_NESTING, nesting_depth
from watcher.api.models.limits import MAX_DEPTH, MAX_KEYS, lone_surrogate, shape_problem


def _deep(depth: int) -> object:
    value: object = 0
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


@pytest.mark.parametrize("depth", [0, 1, 2, 31, 127, 128, 129, 300])
def test_nesting_depth_of_plain_json_is_its_depth(depth: int) -> None:
    assert nesting_depth(json.dumps(_deep(depth)).encode()) == depth


@pytest.mark.parametrize(
    "strings",
    [
        ["[" * 200],
        ["]" * 200 + "[" * 200],
        ['\\"' + "[" * 200],
        ["\\\\", "[" * 200, '"'],
        ['\\\\"' + "[" * 200, "]]]" * 100],
    ],
)
def test_brackets_inside_strings_do_not_count(strings: list[str]) -> None:
    # Over MAX_NESTING brackets in all: the exact count runs (below it, the number of
    # opening brackets is the answer: a bound, never less than the depth).
    body = json.dumps({"k": [[s] for s in strings] * 2, "[[": "]]"}).encode()
    assert nesting_depth(body) == 3


def test_a_string_closing_brackets_cannot_hide_real_depth() -> None:
    hidden = "[" * 150 + '"' + "]" * 400 + '"' + "]" * 150  # one string of 400 closers
    assert nesting_depth(hidden.encode()) == 150 > MAX_NESTING


def test_shape_problem_bounds_depth_keys_and_utf8() -> None:
    assert shape_problem(_deep(MAX_DEPTH - 1), "s") is None
    assert "nested deeper than 32" in str(shape_problem({"x": _deep(MAX_DEPTH)}, "s"))
    many = {f"g{g}": {str(k): 0 for k in range(100)} for g in range(MAX_KEYS // 100)}
    assert shape_problem(many, "s") is not None  # the groups' own keys push it over
    assert shape_problem({"ok": ["\U0001f600"]}, "s") is None  # a pair is fine
    assert "lone surrogate" in str(shape_problem({"ok": ["\udc00"]}, "s"))
    assert "lone surrogate" in str(shape_problem({"\ud800": 1}, "s"))
    assert lone_surrogate("\udfff") and not lone_surrogate("é") and not lone_surrogate(1)


def test_shape_problem_does_not_recurse() -> None:
    value: object = 0
    for _ in range(100_000):  # far past Python's recursion limit
        value = [value]
    assert "nested deeper" in str(shape_problem(value, "s"))
