"""Sharing the names out over the live instances, as a pure plan.

Every instance keeps a liveness row renewed at every check, so each knows how many
instances are alive, standbys included. The *fair share* is ``ceil(names / alive)``. An
instance takes a free or lapsed lease only while it holds fewer than that (a lapsed lease
whose owner sends no heartbeat either is taken at once); one holding at least two more than
a ready peer that is below the fair share gives one lease away per check (a *rebalance*),
then waits a cool-down before giving another, and does not take back what it gave within
the cool-down.

Everything here is a function of the lease table's rows, what this instance holds and the
time: no store, no clock, no threads (watcher/handoff/manager.py carries the plan out).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from watcher.store import lease_store as ls
from watcher.store.records import Lease

READY_MS = 1_500
"""A peer whose last heartbeat is older than this (or 3 checks) is not trusted to take a
lease given away: it may be dying; its row lapses with its leases."""

NEVER = -(10**15)
"""A time long before any clock reading ("never gave anything away")."""


def fair_share(names: int, alive: int) -> int:
    """How many names one of ``alive`` instances should hold: ``ceil(names / alive)``."""
    return -(-names // max(1, alive))


@dataclass(frozen=True)
class Spread:
    """Who holds how many of the names, as one instance sees it at a check."""

    alive: frozenset[str]
    """Instances whose liveness row has not lapsed (this one included)."""
    ready: frozenset[str]
    """Alive peers that sent a heartbeat recently: they will take a lease given away."""
    held: dict[str, int]
    """Live leases per instance, over the names this instance follows."""
    fair: int
    """The fair share: ``ceil(names / alive)``."""

    def taker(self, me: str) -> str | None:
        """A ready peer below the fair share holding at least two fewer names than ``me``
        (so that giving it one cannot make it give one back): None if there is none."""
        mine = self.held.get(me, 0)
        below = sorted(
            (self.held.get(p, 0), p)
            for p in self.ready
            if p != me and self.held.get(p, 0) < self.fair and self.held.get(p, 0) + 2 <= mine
        )
        return below[0][1] if below else None


def plan_spread(
    rows: Sequence[Lease], names: Sequence[str], me: str, held: int, now: int, ready_ms: int
) -> Spread:
    """The :class:`Spread` of ``names`` from the lease table's rows; ``held`` is this
    instance's own count (its in-memory view, ahead of the rows it is renewing)."""
    followed = set(names)
    alive = {me}
    ready = {me}
    counts: Counter[str] = Counter()
    for row in rows:
        if row.expires_at <= now or row.owner is None:
            continue
        if row.name.startswith(ls.INSTANCE_PREFIX):
            alive.add(row.owner)
            if row.acquired_at >= now - ready_ms:
                ready.add(row.owner)
        elif row.name in followed:
            counts[row.owner] += 1
    counts[me] = held
    return Spread(
        frozenset(alive), frozenset(ready), dict(counts), fair_share(len(names), len(alive))
    )


@dataclass(frozen=True)
class Take:
    """A name to try to acquire at this check."""

    name: str
    forced: bool
    """Lapsed, and its owner sends no heartbeat either (kill -9, a pause): taken whatever
    the fair share says, as without balancing; the spread evens out once its row lapses."""


@dataclass(frozen=True)
class Policy:
    """How one instance balances (from ``[handoff]``)."""

    me: str
    names: tuple[str, ...]
    balance: bool
    cooldown_ms: int
    ready_ms: int


def plan_takes(
    policy: Policy,
    rows: Sequence[Lease],
    held: Sequence[str],
    gave_at: Mapping[str, int],
    now: int,
) -> list[Take]:
    """The names not held here worth trying to take now, in config order: free or lapsed
    and, when balancing, not given away within the cool-down. The caller takes a non-forced
    one only while it holds fewer than the fair share (``plan_spread(...).fair``)."""
    current = {r.name: r for r in rows}
    mine = set(held)
    spread = plan_spread(rows, policy.names, policy.me, len(mine), now, policy.ready_ms)
    takes = []
    for name in policy.names:
        row = current.get(name)
        if name in mine or (row is not None and row.expires_at > now):
            continue  # held here, or a live owner: acquire() would refuse anyway
        if not policy.balance:
            takes.append(Take(name, forced=True))
            continue
        if now - gave_at.get(name, NEVER) < policy.cooldown_ms:
            continue
        lapsed = row is not None and not ls.released(row.expires_at)
        forced = lapsed and row is not None and row.owner not in spread.ready
        takes.append(Take(name, forced=forced))
    return takes


def plan_give_away(
    policy: Policy,
    spread: Spread,
    acquired_at: Mapping[str, int],
    last_gave: int,
    now: int,
) -> tuple[str, str] | None:
    """The lease to give away now and the peer expected to take it, or None: only when a
    ready peer is far below this instance, the last gift is older than the cool-down, and
    among the leases held for longer than the cool-down (the newest of them goes)."""
    taker = spread.taker(policy.me)
    if taker is None or now - last_gave < policy.cooldown_ms:
        return None
    settled = [n for n, at in acquired_at.items() if now - at >= policy.cooldown_ms]
    if not settled:
        return None  # every lease here is new: let the spread settle first
    return max(settled, key=lambda n: (acquired_at[n], n)), taker
