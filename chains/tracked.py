"""One endpoint whose every call is recorded in its health.

:class:`TrackedTransport` wraps the real transport of one endpoint (metered against the
chain's call budget and the endpoint's rate limit) and records each answer in its
:class:`chains.health.EndpointHealth`: latency, errors, the head it showed. A node-side error
inside an HTTP 200 answer is a failure of the node (:func:`server_error`); a client-side one
(bad params, "method not offered") is not. The quorum gate uses one alone (it must ask a
*specific* endpoint); :class:`chains.multi.FailoverTransport` composes several.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from chains.budget import CallBudget, MeteredTransport, RateLimiter
from chains.capabilities import error_not_offered
from chains.errors import RpcError
from chains.health import EndpointHealth
from chains.rpc import transport_for
from chains.transport import Call

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
