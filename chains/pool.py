"""The JSON-RPC client a chain is followed through, and its finality gate.

One endpoint: a plain client and the trivial :class:`SingleNodeGate`. Several: a
:class:`chains.multi.MultiRpcClient` (failover with a circuit breaker per endpoint, health
of each) behind the same :class:`chains.rpc.RpcClient` interface the engine uses, and, when
``quorum`` > 1, a :class:`chains.quorum.QuorumGate` over the same endpoints (sharing their
health, so a node the failover has given up on is asked last). The engine does not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chains.budget import CallBudget, MeteredTransport, RateLimiter
from chains.errors import ChainError, ChainIdMismatch, RpcUnavailable
from chains.header_hash import headers_checkable
from chains.health import EndpointHealth, redact
from chains.multi import (
    MIN_STALL_S,
    FailoverTransport,
    MultiRpcClient,
    TrackedTransport,
    stall_period,
)
from chains.quorum import Alert, FinalityGate, QuorumGate, SingleNodeGate, _no_alert
from chains.registry import known_chain
from chains.rpc import RpcClient, connect


def client_for(
    endpoints: Sequence[str],
    chain_id: int | None = None,
    weights: Sequence[float] | None = None,
    timeout_s: float = 5.0,
    base_backoff_s: float = 1.0,
    chain_check_s: float = 300.0,
    budget: CallBudget | None = None,
    rate_limits: Sequence[float] | None = None,
    stall_s: float = MIN_STALL_S,
    stall_lead: int = 2,
) -> RpcClient:
    """The client a chain's engine reads through.

    ``chain_id`` (when given, with several endpoints) is checked on each endpoint before it
    is used, and again every ``chain_check_s``; ``weights`` orders healthy endpoints.
    ``budget`` counts every call sent on every endpoint (chains.budget); ``rate_limits``
    (calls/s, one per endpoint) caps each endpoint, a single one included. With several
    endpoints, the followed one is left as stalled when its head has not moved for
    ``stall_s`` (give :func:`chains.multi.stall_period` of the chain's block time) while
    another is ``stall_lead`` blocks ahead. Headers are re-hashed (chains/header_hash.py)."""
    limiters: list[RateLimiter | None] = (
        [RateLimiter(r) for r in rate_limits] if rate_limits else [None] * len(endpoints)
    )
    if len(limiters) != len(endpoints):
        raise ValueError(
            f"rate_limits needs one limit per endpoint ({len(endpoints)}), got {len(limiters)}"
        )
    checks = headers_checkable(chain_id)
    if len(endpoints) == 1:
        client = connect(endpoints[0], check_headers=checks)
        if budget is None and limiters[0] is None:
            return client
        metered = MeteredTransport(client.transport, budget, limiters[0])
        return RpcClient(metered, max_batch=client.max_batch, check_headers=checks)
    weights = list(weights) if weights else [1.0] * len(endpoints)
    members = [
        TrackedTransport(
            EndpointHealth(
                url,
                weight=w,
                base_backoff_s=base_backoff_s,
                rate_limit=lim.rate if lim is not None else None,
            ),
            timeout_s=timeout_s,
            budget=budget,
            limiter=lim,
        )
        for url, w, lim in zip(endpoints, weights, limiters, strict=True)
    ]
    return MultiRpcClient(
        FailoverTransport(
            members,
            chain_id=chain_id,
            chain_check_s=chain_check_s,
            stall_s=stall_s,
            stall_lead=stall_lead,
        ),
        check_headers=checks,
    )


def stall_period_of(chain_id: int, poll_interval_s: float) -> float:
    """The stall period of a chain: three times its block time (the registry's, or the poll
    interval when that is longer, since a head cannot be seen to move faster than polled),
    at least :data:`chains.multi.MIN_STALL_S`."""
    known = known_chain(chain_id)
    return stall_period(max(poll_interval_s, known.block_time_s if known else 0.0))


def gate_for(
    endpoints: Sequence[str],
    quorum: int,
    client: RpcClient,
    alert: Alert = _no_alert,
    finalized_every_blocks: int = 16,
) -> FinalityGate:
    """The finality gate of a chain: ``quorum`` of ``endpoints`` must agree.

    ``alert(kind, severity, payload)`` receives ``rpc_disagreement`` and
    ``finality_violation`` reports (the service records them as events)."""
    if quorum <= 1:
        return SingleNodeGate(client.endpoint)
    if isinstance(client, MultiRpcClient):
        members: list[RpcClient] = list(client.members)
        transport = client.transport

        def active() -> str:
            return transport.members[transport.active].endpoint

        return QuorumGate(
            members,
            quorum,
            active=active,
            alert=alert,
            finalized_every_blocks=finalized_every_blocks,
        )
    members = [client] + [
        connect(url, check_headers=client.check_headers)
        for url in endpoints
        if url != client.endpoint
    ]
    return QuorumGate(
        members,
        quorum,
        active=lambda: client.endpoint,
        alert=alert,
        finalized_every_blocks=finalized_every_blocks,
    )


def health_report(client: RpcClient) -> list[dict[str, object]] | None:
    """Each endpoint's health (state, latency, error rate, head lag) for a multi-endpoint
    client; None for a single-endpoint one (its health is the chain's)."""
    return client.health_report() if isinstance(client, MultiRpcClient) else None


@dataclass(frozen=True)
class ChainIdAnswer:
    """What one endpoint answered to ``eth_chainId`` at start-up."""

    endpoint: str
    """The endpoint (full URL; redact before showing)."""
    chain_id: int | None
    """Its chain id; None when it gave none."""
    problem: str | None = None
    """Why there is no chain id (unreachable, no answer), else None."""

    def describe(self) -> str:
        """``<endpoint>: chain id N`` or ``<endpoint>: unreachable (...)``, redacted."""
        said = f"chain id {self.chain_id}" if self.chain_id is not None else self.problem
        return f"{redact(self.endpoint)}: {said}"


class ChainIdMajorityMismatch(ChainIdMismatch):
    """Too few endpoints serve the configured chain for the quorum, even if every endpoint
    that did not answer came back right: the chain must not start."""

    def __init__(
        self, chain: str, expected: int, needed: int, answers: Sequence[ChainIdAnswer]
    ) -> None:
        right = sum(1 for a in answers if a.chain_id == expected)
        ChainError.__init__(
            self,
            f"chain {chain!r}: {right} of {len(answers)} rpc endpoints serve chain id "
            f"{expected} (the config's chain_id), {needed} needed (quorum): "
            + "; ".join(a.describe() for a in answers),
        )
        self.expected = expected
        wrong = [a.chain_id for a in answers if a.chain_id not in (None, expected)]
        self.actual = next((w for w in wrong if w is not None), -1)
        self.answers = list(answers)


def check_chain_ids(
    client: RpcClient, chain: str, chain_id: int, quorum: int = 1
) -> list[ChainIdAnswer]:
    """Ask every endpoint its ``eth_chainId`` at start-up; returns the answers.

    The chain may start when at least ``quorum`` (and at least one) endpoints serve
    ``chain_id``; the others that answered another id are marked ``wrong_chain`` (unused
    until right again). Raises :class:`ChainIdMajorityMismatch` when the wrong answers leave
    fewer than ``quorum`` possible, and :class:`chains.errors.RpcUnavailable` when there are
    not enough answers yet (a dead endpoint is not a reason to refuse: retry later)."""
    answers: list[ChainIdAnswer] = []
    if isinstance(client, MultiRpcClient):
        for i, member in enumerate(client.transport.members):
            said = client.transport.probe_chain_id(i)
            answers.append(
                ChainIdAnswer(member.endpoint, said, None)
                if isinstance(said, int)
                else ChainIdAnswer(member.endpoint, None, said)
            )
    else:
        try:
            answers.append(ChainIdAnswer(client.endpoint, client.chain_id()))
        except RpcUnavailable:
            raise  # down at start-up: not a refusal, the service keeps trying
        except ChainError as exc:
            answers.append(ChainIdAnswer(client.endpoint, None, f"no chain id ({exc})"))
    needed = max(1, quorum)
    right = sum(1 for a in answers if a.chain_id == chain_id)
    unknown = sum(1 for a in answers if a.chain_id is None)
    if right >= needed:
        return answers
    if right + unknown < needed:
        if len(answers) == 1 and answers[0].chain_id is not None:
            raise ChainIdMismatch(chain, client.endpoint, chain_id, answers[0].chain_id)
        raise ChainIdMajorityMismatch(chain, chain_id, needed, answers)
    raise RpcUnavailable(
        client.endpoint,
        "eth_chainId",
        f"{right} of {len(answers)} endpoints confirmed chain id {chain_id}, {needed} needed; "
        + "; ".join(a.describe() for a in answers),
    )
