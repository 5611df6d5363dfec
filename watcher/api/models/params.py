"""Bounds of the integer parameters (ids, cursors): what the store's 64-bit columns hold.

A larger value can name nothing; checking it at the edge answers 422 naming the parameter
instead of letting the database overflow (a 500)."""

from __future__ import annotations

MAX_ID = 2**63 - 1
"""Largest row id / ``after`` cursor (a signed 64-bit integer)."""

CURSOR = r"^[0-9]{1,18}$"
"""What a listing's cursor looks like (the ``seq`` of a page's last row, as digits)."""
