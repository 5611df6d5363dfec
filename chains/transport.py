"""The seam between a JSON-RPC client and the wire: what a transport promises.

A transport sends one request or one batch to one endpoint and hands back the raw JSON
answers; everything typed lives above it (:class:`chains.rpc.RpcClient`). The real
transports are :class:`chains.rpc.Web3Transport` (HTTP) and
:class:`chains.ws_transport.WsTransport` (WebSocket); the pool, the budget and the
failover wrap one another through the same two methods, and unit tests script odd node
behaviour through a transport of their own.

The names live here, apart from the client, so that a transport never imports the client
that uses it (no import cycle between ``rpc`` and its transports).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

BlockTag = int | str
"""A block number or one of the tags ``latest``, ``safe``, ``finalized``, ``earliest``."""

Call = tuple[str, Sequence[Any]]
"""A JSON-RPC method name and its params."""


class RpcTransport(Protocol):
    """Sends JSON-RPC requests to one endpoint and returns the raw decoded answers."""

    endpoint: str

    def request(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        """One request; raises :class:`RpcUnavailable` when no JSON answer came back."""
        ...

    def batch(self, calls: Sequence[Call]) -> list[Mapping[str, Any]]:
        """One HTTP request carrying ``calls``; answers in the order of ``calls``."""
        ...


class RpcCaller(Protocol):
    """The untyped half of a client (what :mod:`chains.fallbacks` needs): checked results
    of one call or of a batch, counted like every other call."""

    @property
    def endpoint(self) -> str:
        """The endpoint the caller talks to (for error messages)."""
        ...

    def call(self, method: str, params: Sequence[Any] = ()) -> Any:
        """One call's ``result`` (may be ``None``); a JSON-RPC error raises."""
        ...

    def batch(self, calls: Sequence[Call]) -> list[Any]:
        """The results of ``calls``, in call order."""
        ...


def in_call_order(answers: Sequence[Any], sent: int) -> list[Mapping[str, Any]] | str:
    """A batch's ``answers`` back in call order by their ids (JSON-RPC ids are ascending in
    call order), or why they cannot be: an answer without an id, or two with one id, cannot
    be told apart (a node may answer a batch in any order, so position proves nothing)."""
    if len(answers) != sent or not all(isinstance(a, Mapping) for a in answers):
        return f"expected {sent} answer objects, got {answers!r:.200}"
    ids = [a.get("id") for a in answers]
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return f"a batch answer has no (integer) id: {ids!r:.200}"
    if len(set(ids)) != len(ids):
        return f"two batch answers have the same id: {ids!r:.200}"
    return sorted(answers, key=lambda a: int(a["id"]))
