"""The first decisions of settlements registered alike (guard/first_decisions.py): the
same decisions, digests included, as the guard's one-by-one evaluation gives, for any id
(quotes, backslashes, non-ASCII, line separators), past the policy's longest wait, and
for one id; and the shared text is really used (not the one-by-one fallback)."""

from __future__ import annotations

import pytest

from guard import first_decisions as module
from guard.first_decisions import first_decisions
from guard.settlement import (
    Observation,
    Settlement,
    SettlementPolicy,
    Verdict,
    evaluate_settlement,
)
from guard.types import SettlementId, UnixMillis

IDS = [
    SettlementId("dep_0123456789abcdef01234567"),
    SettlementId("dep_fedcba9876543210fedcba98"),
    SettlementId('odd "quoted" \\ id'),
    SettlementId("non-ascii \u00e9 \u2028 \U0001f600"),
    SettlementId(""),
]


def one_by_one(
    ids: list[SettlementId], initiated_at: int, timeout_ms: int, max_wait_ms: int, now: int
) -> list[object]:
    policy = SettlementPolicy(max_wait_ms=max_wait_ms)
    return [
        evaluate_settlement(
            Settlement(sid, True, UnixMillis(initiated_at), timeout_ms),
            Observation(),
            policy,
            UnixMillis(now),
        )
        for sid in ids
    ]


@pytest.mark.parametrize(
    ("initiated_at", "timeout_ms", "max_wait_ms", "now"),
    [
        (1_700_000_000_000, 3_600_000, 86_400_000, 1_700_000_000_000),  # registered now
        (1_000, 3_600_000, 60_000, 1_500),  # capped by the policy, some time elapsed
        (0, 1, 86_400_000, 0),  # the shortest timeout
    ],
)
def test_each_decision_is_the_guards_own(
    initiated_at: int, timeout_ms: int, max_wait_ms: int, now: int
) -> None:
    policy = SettlementPolicy(max_wait_ms=max_wait_ms)
    got = first_decisions(IDS, UnixMillis(initiated_at), timeout_ms, policy, UnixMillis(now))
    assert got == one_by_one(IDS, initiated_at, timeout_ms, max_wait_ms, now)
    assert {d.verdict for d in got} == {Verdict.AWAITING_FINALITY}
    assert len({d.digest for d in got}) == len(IDS)  # the id is bound in each digest


def test_one_id_and_none() -> None:
    policy = SettlementPolicy(max_wait_ms=60_000)
    one = first_decisions(IDS[:1], UnixMillis(5), 1_000, policy, UnixMillis(5))
    assert one == one_by_one(IDS[:1], 5, 1_000, 60_000, 5)
    assert first_decisions([], UnixMillis(5), 1_000, policy, UnixMillis(5)) == []


def test_a_past_deadline_is_decided_one_by_one() -> None:
    policy = SettlementPolicy(max_wait_ms=60_000)
    got = first_decisions(IDS, UnixMillis(0), 1_000, policy, UnixMillis(2_000))
    assert got == one_by_one(IDS, 0, 1_000, 60_000, 2_000)
    assert {d.verdict for d in got} == {Verdict.TIMEOUT_TREATED_AS_FAILURE}


def test_the_shared_text_is_what_the_guard_digests(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the one-by-one path refused, the batch still answers: the shared text was
    rebuilt and checked against the guard's digest (a change to what the guard digests
    would fail here before it slowed every block)."""
    policy = SettlementPolicy(max_wait_ms=86_400_000)
    expected = one_by_one(IDS, 10, 3_600_000, 86_400_000, 10)
    calls: list[SettlementId] = []
    real = evaluate_settlement

    def counted(settlement: Settlement, *args: object) -> object:
        calls.append(settlement.settlement_id)
        return real(settlement, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "evaluate_settlement", counted)
    got = first_decisions(IDS, UnixMillis(10), 3_600_000, policy, UnixMillis(10))
    assert got == expected
    assert len(calls) == 1  # the marker's alone
