"""Several endpoints behind one transport: failover with backoff and circuit breakers.

The engine reads a chain through one :class:`chains.rpc.RpcClient`. Giving that client a
:class:`FailoverTransport` instead of a single-node transport is all it takes to survive a
node that errors, hangs, lies about its chain id or answers garbage: the engine does not
change.

* :class:`chains.tracked.TrackedTransport` — one endpoint, every call recorded in its
  :class:`chains.health.EndpointHealth`. Used alone by the quorum gate (which must ask a
  *specific* endpoint) and, composed, by the failover transport.
* :class:`FailoverTransport` — sticks to the endpoint that last answered well (so the head
  tracker follows one node's view, not a mix), and moves to the next usable one, in order of
  weight, when a call fails: no answer, an HTTP error, a body that is not JSON, or a
  server-side JSON-RPC error inside HTTP 200. Client-side errors (unknown method, bad
  params) are the same on every node and are returned as they are; so is "method not
  offered here" in any node's words (:mod:`chains.capabilities`): the endpoint stays healthy
  and the client answers from standard calls instead (:attr:`answered_by` names who said it).

An endpoint's chain id is checked before its first use and again every ``chain_check_s``;
one that answers for another chain is ``wrong_chain`` and unused until it is right again.

Stalled heads: a node can answer every call well while its head stays put (a stuck node).
That is no error, so plain failover would follow it forever. Before a call that reads the
head (``eth_blockNumber``, ``latest``), when the followed endpoint was seen at the same head
for ``stall_s``, the other usable endpoints are asked their ``eth_blockNumber`` (at most
once per ``stall_s``, so an idle chain costs one call per endpoint per period). One at least
``stall_lead`` blocks ahead means ours is stuck: it is marked ``stalled`` (with the reason)
and reads move to the best one ahead; the head tracker links the new node's blocks to its
window as usual, so a node on another fork is a reorg (or a quorum hold), never a shortcut.
A stalled endpoint is checked again (one call) after a backoff like an open circuit, and
is usable again once it is less than ``stall_lead`` blocks behind the best head known
(:mod:`chains.stall`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from chains.budget import RateLimited
from chains.errors import NodeDataInvalid, RpcError, RpcUnavailable
from chains.health import EndpointHealth
from chains.rpc import RpcClient
from chains.stall import MIN_STALL_S, StallWatch, reads_head, stall_period
from chains.tracked import CLIENT_ERROR_CODES, TrackedTransport, server_error
from chains.transport import Call

__all__ = [
    "CLIENT_ERROR_CODES",
    "MIN_STALL_S",
    "FailoverTransport",
    "MultiRpcClient",
    "TrackedTransport",
    "reads_head",
    "server_error",
    "stall_period",
]


class FailoverTransport(StallWatch):
    """Many endpoints as one :class:`chains.rpc.RpcTransport`; see the module docstring."""

    def __init__(
        self,
        members: Sequence[TrackedTransport],
        chain_id: int | None = None,
        chain_check_s: float = 300.0,
        max_wait_s: float = 5.0,
        stall_s: float = MIN_STALL_S,
        stall_lead: int = 2,
    ) -> None:
        if not members:
            raise ValueError("at least one endpoint is needed")
        if not stall_s > 0:
            raise ValueError(f"stall_s must be > 0 (got {stall_s})")
        if stall_lead < 1:
            raise ValueError(f"stall_lead must be >= 1 (got {stall_lead})")
        self.members = list(members)
        self.endpoint = members[0].endpoint
        """The preferred endpoint (what error messages and single-node gates name)."""
        self.chain_id = chain_id
        self.chain_check_s = chain_check_s
        self.active = 0
        """Index of the member that answered last (tried first)."""
        self.failovers = 0
        """Times a call moved to another endpoint."""
        self.max_wait_s = max_wait_s
        """Longest wait for a rate slot when every endpoint is at its limit."""
        self.stall_s = stall_s
        """Seconds the followed endpoint's head may stay put before the others are asked."""
        self.stall_lead = stall_lead
        """Blocks another endpoint must be ahead for ours to count as stalled."""
        self.stalls = 0
        """Times reads moved away from a stalled endpoint."""
        self.stall_probes = 0
        """``eth_blockNumber`` calls sent to look for a stall or a catch-up."""
        self.answered_by = self.endpoint
        """The endpoint whose answer was returned last (capabilities are per endpoint)."""
        self._probed_at = float("-inf")
        self._checked: dict[int, float] = {}
        self._lock = threading.Lock()
        self._stall_lock = threading.Lock()

    def order(self) -> list[int]:
        """Members to try, in order: the sticky one, then by weight, then config order."""
        usable = [i for i, m in enumerate(self.members) if m.health.usable]
        rest = sorted(
            (i for i in usable if i != self.active),
            key=lambda i: (-self.members[i].health.weight, i),
        )
        return ([self.active] if self.active in usable else []) + rest

    def _chain_ok(self, i: int) -> bool:
        """Check the member's chain id when due; False when it serves another chain."""
        member = self.members[i]
        if self.chain_id is None:
            return True
        now = time.monotonic()
        last = self._checked.get(i)
        if last is not None and now - last < self.chain_check_s:
            return member.health.wrong_chain is None
        return self.probe_chain_id(i) == self.chain_id

    def probe_chain_id(self, i: int) -> int | str:
        """Ask member ``i`` its ``eth_chainId`` now and mark it ``wrong_chain`` (or right
        again); returns the chain id, or why there is none (for start-up reports)."""
        member = self.members[i]
        self._checked[i] = time.monotonic()
        try:
            answer = member.request("eth_chainId", [])
        except RpcError as exc:
            return f"unreachable ({exc.detail})"
        result = answer.get("result")
        actual = int(result, 16) if isinstance(result, str) and result.startswith("0x") else None
        if actual is None:
            return f"no chain id (answered {answer!r:.80})"
        if self.chain_id is not None:
            member.health.wrong_chain = None if actual == self.chain_id else actual
            if actual != self.chain_id:
                member.health.failure(f"serves chain id {actual}, not {self.chain_id}")
        return actual

    def _each(self, label: str) -> list[int]:
        """Every usable member (after a due chain id check), or RpcUnavailable."""
        order = self.order()
        # Wrong-chain members are re-checked when their check is due (tried last), so that a
        # node that serves the right chain again is used again.
        now = time.monotonic()
        order += [
            i
            for i, m in enumerate(self.members)
            if m.health.wrong_chain is not None
            and now - self._checked.get(i, float("-inf")) >= self.chain_check_s
        ]
        picked = [i for i in order if self._chain_ok(i)]
        if not picked:
            states = ", ".join(f"{m.endpoint}: {m.health.state}" for m in self.members)
            raise RpcUnavailable(self.endpoint, label, f"no usable endpoint ({states})")
        return picked

    def _admitted(self, label: str, calls: int) -> Iterator[int]:
        """Members to try, in order, each with its rate slots taken: one at its limit is
        passed over for the next (like a busy one); when every one is, wait for the earliest
        slot, up to ``max_wait_s``, then :class:`chains.budget.RateLimited`."""
        full: list[int] = []
        tried = False
        for i in self._each(label):
            limiter = self.members[i].limiter
            if limiter is None or limiter.try_acquire(calls):
                tried = True
                yield i
            else:
                full.append(i)
        deadline = time.monotonic() + self.max_wait_s
        while full:
            waits = {i: _wait_of(self.members[i], calls) for i in full}
            first = min(full, key=lambda i: waits[i])
            if time.monotonic() + waits[first] > deadline:
                if tried:
                    return  # the caller raises what the endpoints it tried said
                raise RateLimited(
                    f"{self.endpoint}: {label}: every endpoint is at its rate limit "
                    f"(next slot in {waits[first]:.1f} s)"
                )
            time.sleep(max(waits[first], 0.001))
            limiter = self.members[first].limiter
            if limiter is None or limiter.try_acquire(calls):
                full.remove(first)
                tried = True
                yield first

    def _moved(self, i: int) -> None:
        with self._lock:
            if i != self.active:
                self.failovers += 1
                self.active = i

    def leave_forked(self, forked: int, joined: int, reason: str) -> None:
        """Follow member ``joined`` instead of ``forked``, whose chain the head tracker could
        not join to its header window while ``joined``'s chain joins it (a competing chain, or
        a node left on a stale branch). The forked one is left for a backoff and comes back
        only when the tracker finds the followed chain on it again (``health.unfork``)."""
        self.members[forked].health.fork(reason)
        with self._lock:
            if self.active != joined:
                self.active = joined
                self.failovers += 1

    # -- calls -------------------------------------------------------------------------------

    def request(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        if reads_head(method, params):
            self.check_heads()
        last: Exception | None = None
        answer: Mapping[str, Any] | None = None
        for i in self._admitted(method, 1):
            try:
                answer = self.members[i].send(method, params)
            except RpcError as exc:
                last = exc
                continue
            self.answered_by = self.members[i].endpoint
            if server_error(answer, method) is None:
                self._moved(i)
                return answer
        if answer is not None:
            return answer  # every node said the same kind of error: let the client raise it
        assert last is not None
        raise last

    def batch(self, calls: Sequence[Call]) -> list[Mapping[str, Any]]:
        label = f"batch of {len(calls)}"
        if any(reads_head(method, params) for method, params in calls):
            self.check_heads()
        last: Exception | None = None
        answers: list[Mapping[str, Any]] | None = None
        for i in self._admitted(label, len(calls)):
            try:
                answers = self.members[i].send_batch(calls)
            except RpcError as exc:
                last = exc
                continue
            self.answered_by = self.members[i].endpoint
            if all(server_error(a, m) is None for (m, _), a in zip(calls, answers, strict=False)):
                self._moved(i)
                return answers
        if answers is not None:
            return answers
        assert last is not None
        raise last


def _wait_of(member: TrackedTransport, calls: int) -> float:
    """Seconds until ``member`` has ``calls`` rate slots free."""
    return member.limiter.wait_s(calls) if member.limiter is not None else 0.0


class MemberClient(RpcClient):
    """A client of one member endpoint (the quorum gate asks each one): data of its
    endpoint that fails a check marks that endpoint ``inconsistent`` in the shared health."""

    transport: TrackedTransport

    def distrust(self, endpoint: str, detail: str) -> NodeDataInvalid:
        self.transport.health.mark_inconsistent(detail)
        return super().distrust(endpoint, detail)


class MultiRpcClient(RpcClient):
    """An :class:`RpcClient` over a :class:`FailoverTransport`, with each endpoint's health
    and a single-endpoint client per member (for the quorum gate's cross-checks)."""

    transport: FailoverTransport

    def __init__(
        self, transport: FailoverTransport, max_batch: int = 100, check_headers: bool = False
    ) -> None:
        super().__init__(transport, max_batch=max_batch, check_headers=check_headers)
        self.members = [MemberClient(m, check_headers=check_headers) for m in transport.members]
        """One client per endpoint, sharing the endpoint's health."""

    def distrust(self, endpoint: str, detail: str) -> NodeDataInvalid:
        """Mark ``endpoint`` inconsistent: the failover reads from the others meanwhile."""
        for member in self.transport.members:
            if member.endpoint == endpoint:
                member.health.mark_inconsistent(detail)
        return super().distrust(endpoint, detail)

    def serving_endpoint(self) -> str:
        """The followed endpoint (the next call goes there first)."""
        return self.transport.members[self.transport.active].endpoint

    def answering_endpoint(self) -> str:
        """The endpoint whose answer the transport returned last."""
        return self.transport.answered_by

    @property
    def health(self) -> list[EndpointHealth]:
        """Health of every endpoint, in configuration order."""
        return [m.health for m in self.transport.members]

    def health_report(self) -> list[dict[str, object]]:
        """JSON-ready health of every endpoint, head lag against the best head seen."""
        heads = [h.head for h in self.health if h.head is not None and h.wrong_chain is None]
        best = max(heads) if heads else None
        out = []
        for i, h in enumerate(self.health):
            snap = h.snapshot(best)
            snap["active"] = i == self.transport.active
            snap["not_offered"] = sorted(self.capabilities.lacking(h.endpoint))
            out.append(snap)
        return out
