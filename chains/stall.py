"""Stalled heads: a node that answers every call well while its head stays put.

That is no error, so plain failover would follow a stuck node forever. Before a call that
reads the head (:func:`reads_head`), when the followed endpoint was seen at the same head for
``stall_s``, the other usable endpoints are asked their ``eth_blockNumber`` (at most once per
``stall_s``, so an idle chain costs one call per endpoint per period). One at least
``stall_lead`` blocks ahead means ours is stuck: it is marked ``stalled`` (with the reason)
and reads move to the best one ahead. A stalled endpoint is checked again (one call) after a
backoff like an open circuit, and is usable again once it is less than ``stall_lead`` blocks
behind the best head known.

:class:`StallWatch` is that behaviour as a part of :class:`chains.multi.FailoverTransport`
(which owns the members, the followed index and the counters it reads and moves).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from chains.budget import CallsDeferred
from chains.errors import RpcError
from chains.health import redact
from chains.tracked import TrackedTransport

MIN_STALL_S = 5.0
"""Shortest default stall period: a chain's block times vary, a switch should not."""


def stall_period(block_time_s: float) -> float:
    """The default stall period for a chain with blocks every ``block_time_s``: three block
    times, at least :data:`MIN_STALL_S`."""
    return max(3.0 * block_time_s, MIN_STALL_S)


def reads_head(method: str, params: Sequence[Any]) -> bool:
    """True when the call asks for the node's head (where a stalled node shows)."""
    if method == "eth_blockNumber":
        return True
    return method == "eth_getBlockByNumber" and bool(params) and params[0] == "latest"


class StallWatch:
    """Stall detection over a failover's members (see the module docstring)."""

    members: list[TrackedTransport]
    active: int
    failovers: int
    stall_s: float
    stall_lead: int
    stalls: int
    stall_probes: int
    _probed_at: float
    _lock: threading.Lock
    _stall_lock: threading.Lock

    def check_heads(self) -> None:
        """Before a head read: check stalled endpoints whose backoff passed, and leave the
        followed one when its head is stuck while another's is ahead. Never raises: a probe
        that fails is recorded in that endpoint's health and simply not counted."""
        if not self._stall_lock.acquire(blocking=False):
            return  # another thread is checking: one check is enough
        try:
            self._recheck_stalled()
            self._leave_if_stalled()
        finally:
            self._stall_lock.release()

    def best_head(self) -> int | None:
        """The highest head any endpoint on our chain has shown."""
        heads = [
            m.health.head
            for m in self.members
            if m.health.head is not None and m.health.wrong_chain is None
        ]
        return max(heads) if heads else None

    def _probe_head(self, i: int) -> int | None:
        """Member ``i``'s ``eth_blockNumber`` now (one call, budgeted), None when it has no
        good answer or a limit of ours holds the call back."""
        member = self.members[i]
        if member.limiter is not None and not member.limiter.try_acquire(1):
            return None
        self.stall_probes += 1
        try:
            answer = member.send("eth_blockNumber", [])
        except (RpcError, CallsDeferred):
            return None
        result = answer.get("result")
        if not (isinstance(result, str) and result.startswith("0x")):
            return None
        if member.health.circuit == "open":
            return None  # it went backwards: tripped by the answer itself
        return int(result, 16)

    def _recheck_stalled(self) -> None:
        """Each stalled endpoint whose backoff passed: caught up → usable, else stalled on."""
        for i, member in enumerate(self.members):
            health = member.health
            if health.stalled is None or health.forked is not None:
                continue  # a forked one is checked by the head tracker (see leave_forked)
            best = self.best_head()
            if i == self.active:
                # Followed again (the others failed): its own reads show when it caught up.
                if (
                    health.head is not None
                    and best is not None
                    and best - health.head < self.stall_lead
                ):
                    health.unstall()
                continue
            if not health.stall_due:
                continue
            head = self._probe_head(i)
            best = self.best_head()
            if head is not None and (best is None or best - head < self.stall_lead):
                health.unstall()
            else:
                said = "no head" if head is None else f"head {head}"
                health.stall(f"{said} while the best head known is {best}")

    def _leave_if_stalled(self) -> None:
        """Move to the best endpoint ahead when the followed one's head is stuck."""
        active = self.active
        health = self.members[active].health
        # Seen at the same head for the period, not merely not asked lately (a member that
        # just became the followed one has an old head: that is no stall).
        age = health.frozen_for_s()
        head = health.head
        if head is None or age is None or age < self.stall_s:
            return
        now = time.monotonic()
        if now - self._probed_at < self.stall_s:
            return  # asked within the period: an idle chain costs one probe per period
        self._probed_at = now
        ahead: dict[int, int] = {}
        for i, member in enumerate(self.members):
            if i == active or not member.health.usable or member.health.stalled is not None:
                continue
            theirs = self._probe_head(i)
            if theirs is not None and theirs - head >= self.stall_lead:
                ahead[i] = theirs
        if not ahead:
            return  # nobody is ahead: an idle chain, or all stuck alike; stay and wait
        best = max(ahead, key=lambda i: (ahead[i], self.members[i].health.weight, -i))
        health.stall(
            f"head {head} frozen for {age:.1f} s while "
            f"{redact(self.members[best].endpoint)} is at {ahead[best]}"
        )
        with self._lock:
            if self.active == active:
                self.active = best
                self.failovers += 1
                self.stalls += 1
