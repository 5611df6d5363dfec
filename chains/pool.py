"""The JSON-RPC client a chain is followed through, and its finality gate.

One endpoint: a plain client and the trivial :class:`SingleNodeGate`. Several: a
:class:`chains.multi.MultiRpcClient` (failover with a circuit breaker per endpoint, health
of each) behind the same :class:`chains.rpc.RpcClient` interface the engine uses, and, when
``quorum`` > 1, a :class:`chains.quorum.QuorumGate` over the same endpoints (sharing their
health, so a node the failover has given up on is asked last). The engine does not change.
"""

from __future__ import annotations

from collections.abc import Sequence

from chains.health import EndpointHealth
from chains.multi import FailoverTransport, MultiRpcClient, TrackedTransport
from chains.quorum import Alert, FinalityGate, QuorumGate, SingleNodeGate, _no_alert
from chains.rpc import RpcClient, connect


def client_for(
    endpoints: Sequence[str],
    chain_id: int | None = None,
    weights: Sequence[float] | None = None,
    timeout_s: float = 5.0,
    base_backoff_s: float = 1.0,
    chain_check_s: float = 300.0,
) -> RpcClient:
    """The client a chain's engine reads through.

    ``chain_id`` (when given, with several endpoints) is checked on each endpoint before it
    is used, and again every ``chain_check_s``; ``weights`` orders healthy endpoints."""
    if len(endpoints) == 1:
        return connect(endpoints[0])
    weights = list(weights) if weights else [1.0] * len(endpoints)
    members = [
        TrackedTransport(
            EndpointHealth(url, weight=w, base_backoff_s=base_backoff_s), timeout_s=timeout_s
        )
        for url, w in zip(endpoints, weights, strict=True)
    ]
    return MultiRpcClient(
        FailoverTransport(members, chain_id=chain_id, chain_check_s=chain_check_s)
    )


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
    members = [client] + [connect(url) for url in endpoints if url != client.endpoint]
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
