"""The first decisions of many settlements registered at one instant, alike (pure).

A block of new deposits registers hundreds of settlements at the same instant with the same
timeout and policy. Each one's first decision (nothing observed yet: ``AWAITING_FINALITY``)
is :func:`~guard.settlement.evaluate_settlement` with only the settlement id differing, and
so is the canonical JSON its digest is taken over: the same text around the id. Here that
text is built once, and each digest hashes it with the id's canonical string in its place.

The decisions are exactly :func:`~guard.settlement.evaluate_settlement`'s: the text is
checked once per call against the digest the guard itself gives a marker id, and any
mismatch (the digested fields changed there and not here) falls back to deciding each
settlement on its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from guard.canonical import canonical_json, digest
from guard.directive import waiting_directive
from guard.settlement import (
    Decision,
    Observation,
    Settlement,
    SettlementPolicy,
    Verdict,
    evaluate_settlement,
)
from guard.types import SettlementId, UnixMillis

_MARK = SettlementId("\x00first decision\x00")
"""The id the shared text is built with: no real id holds control characters, so its
canonical string occurs once in the text."""


def first_decisions(
    ids: Sequence[SettlementId],
    initiated_at: UnixMillis,
    timeout_ms: int,
    policy: SettlementPolicy,
    now: UnixMillis,
) -> list[Decision]:
    """``evaluate_settlement(Settlement(id, True, initiated_at, timeout_ms), Observation(),
    policy, now)`` for each of ``ids``, in order (see the module doc)."""

    def alone(sid: SettlementId) -> Decision:
        settlement = Settlement(sid, True, initiated_at, timeout_ms)
        return evaluate_settlement(settlement, Observation(), policy, now)

    marked = alone(_MARK)
    parts = _around_id(marked, initiated_at, timeout_ms) if len(ids) > 1 else None
    if parts is None:
        return [alone(sid) for sid in ids]
    before, after = parts
    deadline = marked.deadline
    assert deadline is not None  # an initiated settlement has one
    out: list[Decision] = []
    for sid in ids:
        text = before + canonical_json(sid) + after
        out.append(
            Decision(
                verdict=marked.verdict,
                directive=waiting_directive(sid, initiated_at, deadline, now),
                settlement_id=sid,
                deadline=deadline,
                elapsed_ms=marked.elapsed_ms,
                remaining_ms=marked.remaining_ms,
                evidence=None,
                digest="sha256:" + hashlib.sha256(text).hexdigest(),
            )
        )
    return out


def _around_id(
    marked: Decision, initiated_at: UnixMillis, timeout_ms: int
) -> tuple[bytes, bytes] | None:
    """The canonical text of ``marked``'s digest before and after its id, or None when the
    text rebuilt here does not hash to the guard's digest (or the verdict is not a wait)."""
    if marked.verdict is not Verdict.AWAITING_FINALITY or marked.evidence is not None:
        return None
    bound = {
        "verdict": marked.verdict.value,
        "settlement_id": _MARK,
        "initiated": True,
        "initiated_at": initiated_at,
        "timeout_ms": timeout_ms,
        "deadline": marked.deadline,
        "evidence": None,
        "elapsed_ms": marked.elapsed_ms,
    }
    if digest(bound) != marked.digest:
        return None
    parts = canonical_json(bound).split(canonical_json(_MARK))
    if len(parts) != 2:
        return None
    return parts[0], parts[1]
