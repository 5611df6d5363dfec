"""A stored receipt as the bytes the API answers (no decoding and
encoding again on every read).

``GET /v1/settlements/{id}/receipt`` used to read the ``body`` column as JSON (decode the
22 KB document of an N = 12 finality receipt), hand the dict to FastAPI (validate it as
``dict[str, Any]``) and encode it again: at W = 1,000 that was most of a receipt read's CPU,
in the interpreter that also builds the next block's receipts. Now the column holds the
text the API answers (:func:`encoded`: JSON without white space, keys in the order the
receipt was built, UTF-8: exactly what FastAPI's encoder wrote for the dict) and a read
takes the column as text, unparsed (:func:`body_text`).

Rows stored before hold SQLAlchemy's default encoding (``", "`` and ``": "`` separators,
non-ASCII escaped): the same document, other bytes. :func:`answer_bytes` re-encodes those
once per read, so every answer has the one encoding whatever the row's age. A JSON reader
sees the same document either way: digests and signatures are over the canonical form
(guard/canonical.py), never over these bytes.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import JSON, Text, bindparam, cast
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.elements import ColumnElement

from watcher.store.json_text import json_text

BODY_PARAM = "body_text"
"""The bound parameter an insert takes the encoded body under."""


def encoded(receipt: dict[str, Any]) -> str:
    """The receipt's text as stored and answered: compact JSON in build order, as FastAPI's
    ``JSONResponse`` (and pydantic's JSON encoder, byte for byte, for these plain values)
    writes it. Written by orjson (watcher/store/json_text.py: the same bytes for the
    strings, integers, lists and objects a receipt holds; the stdlib where orjson refuses):
    at N = 64 the stdlib took ~0.3 ms of a receipt's ~2.9 ms of CPU."""
    return json_text(receipt)


def body_value(dialect: Dialect) -> ColumnElement[Any]:
    """The ``body`` column's value in an insert: :data:`BODY_PARAM` as given, not encoded
    again by the JSON type (PostgreSQL's ``json`` keeps the text it is given, verbatim;
    SQLite stores it as the text it is)."""
    param = bindparam(BODY_PARAM, type_=Text)
    return cast(param, JSON) if dialect.name == "postgresql" else param


def body_text(column: ColumnElement[Any]) -> ColumnElement[str]:
    """The stored text of a JSON column, not decoded."""
    return cast(column, Text)


def answer_bytes(text: str) -> bytes:
    """The bytes answered for a stored body: the text itself when it is in
    :func:`encoded`'s form, else (a row of an older version) re-encoded in it."""
    if not _compact(text):
        text = encoded(json.loads(text))
    return text.encode("utf-8")


def _compact(text: str) -> bool:
    """Whether ``text`` (a JSON object ``json.dumps`` wrote) has no white space between
    its tokens: a receipt's first key is a plain name, so the separator after it tells
    (``{"kind":`` against ``{"kind": ``)."""
    if not text.startswith('{"'):
        return text == "{}"
    end = text.find('"', 2)
    return end > 0 and text[end + 1 : end + 2] == ":" and text[end + 2 : end + 3] != " "
