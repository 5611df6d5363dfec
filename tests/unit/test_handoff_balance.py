"""The balancing plan is a pure function of the lease table, what is held and the time:
these cases need no store, no clock and no thread."""

from __future__ import annotations

from watcher.handoff.balance import Policy, plan_give_away, plan_spread, plan_takes
from watcher.store.lease_store import INSTANCE_PREFIX, RELEASED
from watcher.store.records import Lease

NAMES = ("local", "second", "third")
NOW = 100_000


def policy(me: str = "A", balance: bool = True) -> Policy:
    return Policy(me, NAMES, balance, cooldown_ms=2_000, ready_ms=1_500)


def alive(owner: str, heartbeat: int = NOW - 100) -> Lease:
    return Lease(INSTANCE_PREFIX + owner, owner, 0, heartbeat, NOW + 5_000)


def test_a_lapsed_lease_of_a_silent_owner_is_taken_at_once_a_released_one_within_the_share() -> (
    None
):
    """B's lease of ``local`` lapsed and B sends no heartbeat (kill -9): A takes it whatever
    the fair share says; ``second`` was released (SIGTERM): a normal take; ``third`` has a
    live owner: not tried."""
    rows = [
        Lease("local", "B", 3, NOW - 20_000, NOW - 1),
        Lease("second", "C", 1, NOW - 20_000, RELEASED),
        Lease("third", "C", 2, NOW - 20_000, NOW + 5_000),
        alive("C"),
    ]
    takes = plan_takes(policy(), rows, [], {}, NOW)
    assert [(t.name, t.forced) for t in takes] == [("local", True), ("second", False)]
    assert plan_spread(rows, NAMES, "A", 0, NOW, 1_500).fair == 2  # A and C alive


def test_a_lease_given_away_is_not_taken_back_within_the_cool_down() -> None:
    takes = plan_takes(policy(), [], [], {"local": NOW - 1_000}, NOW)
    assert [t.name for t in takes] == ["second", "third"]
    later = plan_takes(policy(), [], [], {"local": NOW - 2_000}, NOW)
    assert [t.name for t in later] == list(NAMES)


def test_the_newest_settled_lease_goes_to_a_ready_peer_far_below_the_share() -> None:
    rows = [alive("B")]
    spread = plan_spread(rows, NAMES, "A", 3, NOW, 1_500)
    held = {"local": NOW - 9_000, "second": NOW - 5_000, "third": NOW - 500}
    assert plan_give_away(policy(), spread, held, -(10**15), NOW) == ("second", "B")
    assert plan_give_away(policy(), spread, held, NOW - 1_000, NOW) is None, "cool-down"
    stale = plan_spread([alive("B", heartbeat=NOW - 4_000)], NAMES, "A", 3, NOW, 1_500)
    assert plan_give_away(policy(), stale, held, -(10**15), NOW) is None, "B not ready"
