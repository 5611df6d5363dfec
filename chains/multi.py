"""Several endpoints behind one transport: failover with backoff and circuit breakers.

The engine reads a chain through one :class:`chains.rpc.RpcClient`. Giving that client a
:class:`FailoverTransport` instead of a single-node transport is all it takes to survive a
node that errors, hangs, lies about its chain id or answers garbage: the engine does not
change.

* :class:`TrackedTransport` — one endpoint, every call recorded in its
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
is usable again once it is less than ``stall_lead`` blocks behind the best head known.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from chains.budget import CallBudget, CallsDeferred, MeteredTransport, RateLimited, RateLimiter
from chains.capabilities import error_not_offered
from chains.errors import RpcError, RpcUnavailable
from chains.health import EndpointHealth, redact
from chains.rpc import Call, RpcClient, transport_for

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


CLIENT_ERROR_CODES = frozenset({-32600, -32601, -32602, -32700, 3})
"""JSON-RPC error codes that describe the request, not the node: failing over is useless."""


def server_error(answer: Any, method: str = "") -> str | None:
    """The reason when ``answer`` (one JSON-RPC answer to ``method``) is a node-side error,
    else None. "Method not offered here" (:mod:`chains.capabilities`, e.g. Hardhat's -32004)
    is no fault of the node: the client falls back to standard calls, the endpoint stays
    healthy."""
    if not isinstance(answer, Mapping):
        return f"answer is not an object: {answer!r:.80}"
    error = answer.get("error")
    if error is None:
        return None
    code = error.get("code") if isinstance(error, Mapping) else None
    if code in CLIENT_ERROR_CODES or error_not_offered(method, answer):
        return None
    message = error.get("message") if isinstance(error, Mapping) else error
    return f"JSON-RPC error {code}: {message}"


class TrackedTransport:
    """One endpoint; every call updates its health (latency, errors, head)."""

    def __init__(
        self,
        health: EndpointHealth,
        timeout_s: float = 5.0,
        budget: CallBudget | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.endpoint = health.endpoint
        self.health = health
        self.limiter = limiter
        """The endpoint's rate limit (None: unlimited); failover passes over it when full."""
        self._inner = MeteredTransport(
            transport_for(health.endpoint, timeout_s=timeout_s), budget, limiter
        )

    def request(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        """One call, after waiting (bounded) for a rate slot: how the quorum gate asks."""
        if self.limiter is not None:
            self.limiter.acquire(1, self._inner.max_wait_s, method, self.endpoint)
        return self.send(method, params)

    def batch(self, calls: Sequence[Call]) -> list[Mapping[str, Any]]:
        """One batch, after waiting (bounded) for its rate slots."""
        if self.limiter is not None:
            label = f"batch of {len(calls)}"
            self.limiter.acquire(len(calls), self._inner.max_wait_s, label, self.endpoint)
        return self.send_batch(calls)

    def send(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        """One call, its rate slot already taken (budget counted, health recorded)."""
        started = time.monotonic()
        try:
            answer = self._inner.send(method, params)
        except RpcError as exc:
            self.health.failure(str(exc))
            raise
        self._record(started, [answer], [(method, params)])
        return answer

    def send_batch(self, calls: Sequence[Call]) -> list[Mapping[str, Any]]:
        """One batch, its rate slots already taken."""
        started = time.monotonic()
        try:
            answers = self._inner.send_batch(calls)
        except RpcError as exc:
            self.health.failure(str(exc))
            raise
        self._record(started, answers, calls)
        return answers

    def _record(self, started: float, answers: Sequence[Any], calls: Sequence[Call]) -> None:
        reasons = [
            r
            for r in (server_error(a, m) for (m, _), a in zip(calls, answers, strict=False))
            if r is not None
        ]
        if reasons:
            self.health.failure(reasons[0])
            return
        for (method, params), answer in zip(calls, answers, strict=False):
            result = answer.get("result")
            head: int | None = None
            if method == "eth_blockNumber" and isinstance(result, str):
                head = int(result, 16)
            elif (
                method == "eth_getBlockByNumber"
                and params
                and params[0] == "latest"
                and isinstance(result, Mapping)
                and isinstance(result.get("number"), str)
            ):
                head = int(result["number"], 16)
            if head is not None and not self.health.saw_head(head):
                # The answer is passed on (the tracker calls it lagging, not a reorg), but
                # the node is unhealthy: its circuit opens and reads move to another node.
                self.health.trip(f"head went backwards to {head} (was {self.health.head})")
                return
        self.health.success(time.monotonic() - started)


class FailoverTransport:
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

    # -- stalled heads (see the module docstring) -----------------------------------------

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


class MultiRpcClient(RpcClient):
    """An :class:`RpcClient` over a :class:`FailoverTransport`, with each endpoint's health
    and a single-endpoint client per member (for the quorum gate's cross-checks)."""

    transport: FailoverTransport

    def __init__(self, transport: FailoverTransport, max_batch: int = 100) -> None:
        super().__init__(transport, max_batch=max_batch)
        self.members = [RpcClient(m) for m in transport.members]
        """One client per endpoint, sharing the endpoint's health."""

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
