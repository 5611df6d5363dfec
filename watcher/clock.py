"""The clock every part of the watcher is given (never read behind its back).

Time is a collaborator: the wiring point passes a :data:`Clock` to whatever needs "now",
so a test injects one it controls instead of sleeping on the wall clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]
"""Returns the current Unix time in milliseconds."""


def wall_clock_ms() -> int:
    """The real clock."""
    return time.time_ns() // 1_000_000
