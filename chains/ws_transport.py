"""JSON-RPC over one WebSocket: the transport for ``ws://`` and ``wss://`` endpoints.

The HTTP transport (:class:`chains.rpc.Web3Transport`) opens a request per call; a node that
is listed by its WebSocket URL is read here over one long-lived connection instead
(``websockets``' sync client). Requests on a connection are answered in order of the ids
we send, so calls are serialised by a lock: one call in flight per transport, exactly like
an HTTP keep-alive connection. Batches are JSON arrays, as over HTTP.

Errors are mapped at the edge like the HTTP transport does: no connection, a closed
connection or a timeout is :class:`~chains.errors.RpcUnavailable` (and the connection is
dropped, so the next call dials again); a frame that is not JSON, or an answer of the wrong
shape, is :class:`~chains.errors.RpcMalformedResponse`. Nothing is retried here: retrying
is the tracker's (or the failover's) decision.
"""

from __future__ import annotations

import contextlib
import json
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from websockets.exceptions import WebSocketException
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from chains.errors import RpcMalformedResponse, RpcUnavailable
from chains.transport import in_call_order

if TYPE_CHECKING:
    from chains.transport import Call

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Largest answer accepted: a batch of full blocks is far over websockets' 1 MiB default."""

WS_ERRORS = (WebSocketException, OSError, TimeoutError, EOFError)
"""What the websockets client raises for a connection that failed, closed or timed out
(``ConnectionClosed`` and the handshake errors are ``WebSocketException``s)."""


def open_websocket(url: str, timeout_s: float) -> ClientConnection:
    """A client connection to ``url`` (raises one of :data:`WS_ERRORS`).

    Compression is off (answers are small on loopback and latency is the point) and answers
    up to :data:`MAX_MESSAGE_BYTES` are accepted."""
    return ws_connect(
        url,
        open_timeout=timeout_s,
        close_timeout=1.0,
        compression=None,
        max_size=MAX_MESSAGE_BYTES,
        legacy=True,  # websockets >= 17.1: a plain connection whose close is ours to call
    )


def close_quietly(conn: ClientConnection | None) -> None:
    """Close ``conn`` (if any), ignoring a connection that is already broken."""
    if conn is not None:
        with contextlib.suppress(*WS_ERRORS):
            conn.close()


class _Holder:
    """The current connection, apart from the transport so a finalizer can close it when
    the transport is dropped (a connection keeps a reader thread alive until closed)."""

    def __init__(self) -> None:
        self.conn: ClientConnection | None = None


class WsTransport:
    """A :class:`chains.rpc.RpcTransport` over one WebSocket connection (see the module)."""

    def __init__(self, endpoint: str, timeout_s: float = 10.0) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self._holder = _Holder()
        self._lock = threading.Lock()
        self._next_id = 0
        weakref.finalize(self, _close_held, self._holder)

    def close(self) -> None:
        """Close the connection (the next call opens a new one)."""
        with self._lock:
            close_quietly(self._holder.conn)
            self._holder.conn = None

    def _exchange(self, label: str, body: Any) -> Any:
        """Send ``body``, return the decoded answer; maps and drops a failed connection."""
        with self._lock:
            try:
                conn = self._holder.conn
                if conn is None:
                    conn = self._holder.conn = open_websocket(self.endpoint, self.timeout_s)
                conn.send(json.dumps(body))
                text = conn.recv(timeout=self.timeout_s)
            except WS_ERRORS as exc:
                close_quietly(self._holder.conn)
                self._holder.conn = None
                raise RpcUnavailable(
                    self.endpoint, label, f"{type(exc).__name__}: {exc}".rstrip(": ")
                ) from exc
        try:
            return json.loads(text)
        except ValueError as exc:
            raise RpcMalformedResponse(self.endpoint, label, f"not JSON: {text!r:.200}") from exc

    def _ids(self, count: int) -> int:
        """The first of ``count`` fresh request ids."""
        with self._lock:
            first = self._next_id + 1
            self._next_id += count
            return first

    def request(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        """One JSON-RPC request; see :class:`chains.rpc.RpcTransport`."""
        request_id = self._ids(1)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": list(params)}
        answer = self._exchange(method, body)
        if not isinstance(answer, Mapping):
            raise RpcMalformedResponse(
                self.endpoint, method, f"answer is not an object: {answer!r:.200}"
            )
        if answer.get("id") != request_id and answer.get("error") is None:
            self.close()  # the stream is out of step with our requests: start afresh
            raise RpcMalformedResponse(
                self.endpoint, method, f"answer to another request: {answer!r:.200}"
            )
        return answer

    def batch(self, calls: Sequence[Call]) -> list[Mapping[str, Any]]:
        """One JSON array of requests; answers in the order of ``calls``."""
        label = f"batch of {len(calls)}"
        first = self._ids(len(calls))
        body = [
            {"jsonrpc": "2.0", "id": first + i, "method": method, "params": list(params)}
            for i, (method, params) in enumerate(calls)
        ]
        answers = self._exchange(label, body)
        ordered = in_call_order(answers if isinstance(answers, list) else [answers], len(calls))
        if isinstance(ordered, str):
            raise RpcMalformedResponse(self.endpoint, label, ordered)
        if [a["id"] for a in ordered] != [first + i for i in range(len(calls))]:
            raise RpcMalformedResponse(self.endpoint, label, "answer ids are not the ids sent")
        return ordered


def _close_held(holder: _Holder) -> None:
    close_quietly(holder.conn)
    holder.conn = None
