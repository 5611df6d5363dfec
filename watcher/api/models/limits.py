"""Bounds on what a JSON body may hold, so that anything stored can be read back.

A body's JSON parses into any depth and any size; the store keeps it as text, and every
answer that shows it (the settlement view, the delivery body) is encoded again. Pydantic's
JSON encoder stops at 255 nested containers, so a ``dependent_state`` 255 deep was stored
(201) and then every ``GET`` of it was a 500 for ever. These bounds, far inside every
encoder's limit, are checked before anything is stored. Strings are checked too: a lone
UTF-16 surrogate (``"\\udc00"``) is valid JSON text but no UTF-8 string, so the store
cannot write it and no answer can carry it.

The walk is iterative: a value nested deeper than Python's recursion limit is refused, not
a crash.
"""

from __future__ import annotations

MAX_DEPTH = 32
"""Most nested objects and arrays in ``dependent_state`` (the state itself is depth 1)."""

MAX_KEYS = 10_000
"""Most keys in all the objects of ``dependent_state`` together."""


def lone_surrogate(value: object) -> bool:
    """Whether ``value`` is a string holding a code point UTF-8 cannot encode."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def shape_problem(
    value: object, root: str = "$", max_depth: int = MAX_DEPTH, max_keys: int = MAX_KEYS
) -> str | None:
    """Why a JSON value is too deep, has too many keys, or holds a string that is not UTF-8
    (``root`` names the value); None when it can be stored and read back."""
    keys = 0
    stack: list[tuple[object, int, str]] = [(value, 1, root)]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, dict | list) and depth > max_depth:
            where = _short(path)
            return f"{root}: nested deeper than {max_depth} objects and arrays (at {where})"
        if isinstance(item, dict):
            keys += len(item)
            if keys > max_keys:
                return f"{root}: more than {max_keys} keys in all its objects"
            for key, inner in item.items():
                if lone_surrogate(key):
                    return f"{root}: a key holds a lone surrogate, not UTF-8 (in {_short(path)})"
                stack.append((inner, depth + 1, f"{path}.{key}"))
        elif isinstance(item, list):
            stack.extend((inner, depth + 1, f"{path}[{i}]") for i, inner in enumerate(item))
        elif lone_surrogate(item):
            return f"{root}: holds a lone surrogate, not UTF-8 (at {_short(path)})"
    return None


def storable(value: object, field_name: str | None) -> object:
    """``value`` if it can be stored: every string UTF-8 (no lone surrogate), and a
    ``dependent_state`` within its depth and keys; else the ``ValueError`` a model's
    ``mode="before"`` validator raises (pydantic names the field)."""
    if lone_surrogate(value):
        raise ValueError("holds a lone surrogate (not UTF-8)")
    if field_name == "dependent_state" and value is not None:
        problem = shape_problem(value, "dependent_state")
        if problem is not None:
            raise ValueError(problem.removeprefix("dependent_state: "))
    return value


def _short(path: str, most: int = 60) -> str:
    """A path as an error shows it: its end, if long (the deep part is the interesting one)."""
    return path if len(path) <= most else "…" + path[-most:]
