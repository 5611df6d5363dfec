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
  params) are the same on every node and are returned as they are.

An endpoint's chain id is checked before its first use and again every ``chain_check_s``;
one that answers for another chain is ``wrong_chain`` and unused until it is right again.

Limits (chains.budget): every call sent counts against the chain's :class:`CallBudget`, if
any; an endpoint at its rate limit is passed over for the next usable one, and when every
endpoint is at its limit the call waits (bounded) for the earliest free slot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from chains.budget import CallBudget, MeteredTransport, RateLimited, RateLimiter
from chains.errors import RpcError, RpcUnavailable
from chains.health import EndpointHealth
from chains.rpc import Call, RpcClient, transport_for

CLIENT_ERROR_CODES = frozenset({-32600, -32601, -32602, -32700, 3})
"""JSON-RPC error codes that describe the request, not the node: failing over is useless."""


def server_error(answer: Any) -> str | None:
    """The reason when ``answer`` (one JSON-RPC answer) is a node-side error, else None."""
    if not isinstance(answer, Mapping):
        return f"answer is not an object: {answer!r:.80}"
    error = answer.get("error")
    if error is None:
        return None
    code = error.get("code") if isinstance(error, Mapping) else None
    if code in CLIENT_ERROR_CODES:
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
        reasons = [r for r in (server_error(a) for a in answers) if r is not None]
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
    ) -> None:
        if not members:
            raise ValueError("at least one endpoint is needed")
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
        self._checked: dict[int, float] = {}
        self._lock = threading.Lock()

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

    def request(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        last: Exception | None = None
        answer: Mapping[str, Any] | None = None
        for i in self._admitted(method, 1):
            try:
                answer = self.members[i].send(method, params)
            except RpcError as exc:
                last = exc
                continue
            if server_error(answer) is None:
                self._moved(i)
                return answer
        if answer is not None:
            return answer  # every node said the same kind of error: let the client raise it
        assert last is not None
        raise last

    def batch(self, calls: Sequence[Call]) -> list[Mapping[str, Any]]:
        label = f"batch of {len(calls)}"
        last: Exception | None = None
        answers: list[Mapping[str, Any]] | None = None
        for i in self._admitted(label, len(calls)):
            try:
                answers = self.members[i].send_batch(calls)
            except RpcError as exc:
                last = exc
                continue
            if all(server_error(a) is None for a in answers):
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
            out.append(snap)
        return out
