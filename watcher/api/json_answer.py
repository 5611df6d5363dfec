"""The answers that carry many settlements (a batch's results, a listing page), encoded with
orjson (watcher/store/json_text.py): ~850 KB for a batch of 1,000, a tenth of the stdlib's
time. The same JSON document; the single settlement read keeps the stdlib's bytes."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from watcher.store.json_text import json_bytes


class JsonAnswer(JSONResponse):
    """A ``JSONResponse`` rendered by :func:`~watcher.store.json_text.json_bytes`."""

    def render(self, content: Any) -> bytes:
        return json_bytes(content)
