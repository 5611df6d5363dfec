"""The directive of a settlement still waiting: its words depend on the instant they are
said, so a view computes them when it answers (the decision stores the ones true at its own
instant) and :func:`guard.settlement.evaluate_settlement` uses the same words.
"""

from __future__ import annotations


def waiting_directive(settlement_id: str, initiated_at: int, deadline: int, now: int) -> str:
    """The ``AWAITING_FINALITY`` directive at ``now``: time elapsed and left. A view computes
    it when it answers (the one stored with a decision is only true at that decision's
    instant). Past the deadline, before the timeout is decided, it says the verdict is due
    (a timeout, unless finality was observed before the deadline)."""
    elapsed = max(0, now - initiated_at)
    if now < deadline:
        return (
            f"WAIT: settlement {settlement_id} not final yet ({elapsed} ms elapsed, "
            f"{deadline - now} ms left)."
        )
    return (
        f"WAIT: settlement {settlement_id} not final yet ({elapsed} ms elapsed; the deadline "
        f"passed {now - deadline} ms ago): its verdict is due, a timeout unless finality was "
        "observed before the deadline."
    )
