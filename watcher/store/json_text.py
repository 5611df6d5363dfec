"""JSON written fast where a lot of it is written: orjson, the stdlib where orjson refuses.

A batch of 1,000 registrations writes 1,000 decision columns and answers ~850 KB of views;
the stdlib encoder took ~15 ms of the batch's ~160 ms of CPU for those, orjson ~1.5 ms
(measured side by side, bench/README.md "API under load"). orjson writes the same JSON
document (compact, keys in insertion order, UTF-8 unescaped), and refuses what it cannot
write exactly: an integer past 64 bits, a key that is not a string, nesting deeper than 254
(a ``dependent_state`` stored before its bound). Those go to ``json.dumps``, so nothing that
was writable before is refused now. Never used where bytes are compared or signed: digests
and signatures are over guard/canonical.py's encoding, and the settlement read keeps the
stdlib's bytes (watcher/api/hot_read.py answers exactly what its route does).
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def json_bytes(value: Any) -> bytes:
    """``value`` as compact JSON in UTF-8."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: a value it will not write exactly
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def json_text(value: Any) -> str:
    """:func:`json_bytes` as text (what a JSON column stores)."""
    return json_bytes(value).decode("utf-8")
