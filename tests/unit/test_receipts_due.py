"""watcher/receipts/due.py: a new block's receipts never wait behind a backlog of retries.

Why: the due list was tried in the order settlements were noted, 50 per tick, so 50
receipts that kept failing (a node lagging on old blocks) took every place of a tick, and a
new block's receipts waited behind them.
"""

from __future__ import annotations

from watcher.receipts.due import BACKOFF_MS, BUILDS_PER_POLL, Due, ready


def test_fresh_decisions_go_before_a_backlog_of_retries() -> None:
    due: dict[str, Due] = {}
    for i in range(2 * BUILDS_PER_POLL):  # noted first, failed once, their wait over
        entry = due[f"old{i}"] = Due()
        entry.postpone(now=0)
    for i in range(10):
        due[f"new{i}"] = Due()
    now = BACKOFF_MS[0]
    picked = ready(due, now)
    assert len(picked) == BUILDS_PER_POLL
    assert picked[:10] == [f"new{i}" for i in range(10)]
    assert all(sid.startswith("old") for sid in picked[10:])


def test_retries_wait_out_their_backoff_and_a_new_decision_resets_it() -> None:
    entry = Due()
    waits = [entry.postpone(now=0) for _ in range(len(BACKOFF_MS) + 2)]
    assert waits == [*BACKOFF_MS, BACKOFF_MS[-1], BACKOFF_MS[-1]]
    due = {"s": entry}
    assert ready(due, now=BACKOFF_MS[-1] - 1) == []
    entry.renew()
    assert ready(due, now=0) == ["s"]
