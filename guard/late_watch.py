"""How long a settlement stays watched after its verdict: the late-finality window.

A terminal verdict ends the wait, but a timeout is not the end of the story: the tx may still
become final after the deadline, and whoever discarded on the timeout must then reconcile
(the ``late_finality`` event). So a settlement that timed out stays watched for a further
``late_watch_ms`` past its deadline, unless that late finality was already seen; every other
terminal verdict stops the watch at once. Chain settlements, payments and off-chain sources
all apply this one rule (sources may add a reversal window of their own on top).
"""

from __future__ import annotations

from guard.settlement import Transition, TransitionKind, Verdict


def still_watched(transition: Transition, deadline: int, late_watch_ms: int, now: int) -> bool:
    """Whether the settlement whose decision moved by ``transition`` at ``now`` is still
    followed: until terminal; a timeout until ``deadline + late_watch_ms`` (exclusive) or
    until its late finality is recorded, whichever comes first."""
    verdict = transition.decision.verdict
    return not verdict.terminal or (
        verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE
        and transition.kind is not TransitionKind.LATE_FINALITY
        and now < deadline + late_watch_ms
    )
