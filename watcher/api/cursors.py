"""Cursors of the paged lists (settlements, deposits, invoices): a ``seq`` as text."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from watcher.api.errors import ApiError
from watcher.api.models.params import CURSOR

CursorParam = Annotated[
    str | None, Query(description="next_cursor of the previous page.", pattern=CURSOR)
]
"""The ``cursor`` query parameter."""


def cursor_seq(cursor: str | None) -> int:
    """The seq a cursor stands for; 422 naming ``cursor`` if it is not one we gave out."""
    if cursor is None:
        return 0
    if not cursor.isascii() or not cursor.isdigit() or len(cursor) > 18:
        raise ApiError(422, "cursor: not a cursor this API gave out", fields=["cursor"])
    return int(cursor)
