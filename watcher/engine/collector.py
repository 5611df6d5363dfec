"""The cyclic garbage collector held off while a block's payments and deposits are written.

A block of 1,000 deposits builds some 100,000 short-lived objects (rows, records, decisions,
their evidence), almost all freed by reference counting as soon as they are used. Each 700
allocations the collector looked through the young ones anyway, and about once a block
through everything the poll still held: 45-70 ms of a block finalizing 1,000 deposits
(bench/deposits_cost.py), for no garbage found. Held off for the block's payment writes,
the collector resumes afterwards and looks only at what survived.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold the cyclic collector off inside the block (reference counting still frees);
    it is enabled again afterwards only if it was before (an embedding application may
    have turned it off itself)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
