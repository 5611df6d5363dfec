"""The JSON-RPC client a chain is followed through, and its finality gate.

Today: the first configured endpoint, trusted alone. Several endpoints with failover,
health and a quorum gate plug in here without the engine changing.
"""

from __future__ import annotations

from collections.abc import Sequence

from chains.quorum import FinalityGate, SingleNodeGate
from chains.rpc import RpcClient, connect


def client_for(endpoints: Sequence[str]) -> RpcClient:
    """The client a chain's engine reads through."""
    return connect(endpoints[0])


def gate_for(endpoints: Sequence[str], quorum: int, client: RpcClient) -> FinalityGate:
    """The finality gate of a chain: ``quorum`` of ``endpoints`` must agree."""
    return SingleNodeGate(client.endpoint)
