"""Server-Sent Events frames out of text lines: the one parser both clients share.

The daemon's ``GET /v1/events`` stream sends ``id:``/``event:``/``data:`` frames and comment
keepalives, and ends every few seconds with a ``retry:`` hint; the caller resumes with
``Last-Event-ID``. Parsing is kept apart from I/O so the sync and async clients agree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FrameParser:
    """Feed it lines (without their newline); it returns an event's JSON when a frame ends."""

    data: list[str] = field(default_factory=list)
    last_id: int | None = None
    """The id of the last complete frame (what ``Last-Event-ID`` resumes from)."""
    retry_ms: int | None = None

    def feed(self, line: str) -> dict[str, Any] | None:
        """One line in; the decoded ``data`` of a frame that just ended, else None."""
        if line == "":
            if not self.data:
                return None
            text = "\n".join(self.data)
            self.data = []
            event: dict[str, Any] = json.loads(text)
            if isinstance(event.get("id"), int):
                self.last_id = event["id"]
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            self.data.append(value)
        elif name == "id" and value.strip().isdigit():
            self.last_id = int(value.strip())
        elif name == "retry" and value.strip().isdigit():
            self.retry_ms = int(value.strip())
        return None
