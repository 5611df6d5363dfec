"""Errors of the chain layer. No web3 exception crosses out of chains/: they map to these.

::

    ChainError(Exception)
    ├── RpcError                         the node gave no usable answer
    │   ├── RpcUnavailable(ConnectionError)   refused, timed out, HTTP error status
    │   ├── RpcErrorResponse             a JSON-RPC error object (also inside HTTP 200)
    │   └── RpcMalformedResponse(ValueError)  an answer without the expected shape
    ├── ChainInconsistent                the node's answers contradict each other
    ├── NodeDataInvalid                  an answer fails a check (hash, root, what was asked)
    ├── ReorgTooDeep                     no common ancestor inside the header window
    ├── ChainIdMismatch                  the node serves another chain than configured
    ├── BranchMoved                      a proof's blocks are not (or no longer) canonical
    └── ProofUnavailable                 the node's answers do not rebuild a header's root
"""

from __future__ import annotations

from chains.redact import redact_text, redact_url


class ChainError(Exception):
    """Base of every error the chain layer raises in normal operation."""


class RpcError(ChainError):
    """The node did not give a usable answer."""

    def __init__(self, endpoint: str, method: str, detail: str) -> None:
        # The text is what health, events, alerts and logs show: the endpoint and the
        # transport's own words about it (which embed the full URL) are redacted here, at
        # the source; ``endpoint`` keeps the URL for routing, never for showing.
        detail = redact_text(detail, [endpoint])
        super().__init__(f"{redact_url(endpoint)}: {method}: {detail}")
        self.endpoint = endpoint
        self.method = method
        self.detail = detail


class RpcUnavailable(RpcError, ConnectionError):
    """The transport failed: connection refused, timeout, or an HTTP error status."""


class RpcErrorResponse(RpcError):
    """The node answered with a JSON-RPC error object, whatever the HTTP status was."""

    def __init__(self, endpoint: str, method: str, code: int, message: str) -> None:
        super().__init__(endpoint, method, f"JSON-RPC error {code}: {message}")
        self.code = code
        self.message = message


class RpcMalformedResponse(RpcError, ValueError):
    """The answer does not have the shape the method promises."""


class ChainInconsistent(ChainError):
    """The node's answers contradict each other (e.g. a fetched range does not link up).

    Usually a node switching forks between two calls; the tracker waits and retries.
    """


class NodeDataInvalid(ChainError):
    """An endpoint's answer fails a check it must pass: a header whose fields do not hash to
    its ``hash``, receipts or txs that do not rebuild the header's root, a tx or block that is
    not the one asked for. Its data is not believed: the endpoint is marked ``inconsistent``
    and, where there is another, the chain is read from that one."""

    def __init__(self, endpoint: str, detail: str) -> None:
        detail = redact_text(detail, [endpoint])
        super().__init__(f"endpoint {redact_url(endpoint)} is inconsistent: {detail}")
        self.endpoint = endpoint
        self.detail = detail


class ReorgTooDeep(ChainError):
    """The new chain shares no block with the stored header window."""

    def __init__(self, chain: str, window_bottom: int) -> None:
        super().__init__(
            f"{chain}: reorg deeper than the header window (no common ancestor at or above "
            f"block {window_bottom}); refusing to guess"
        )
        self.chain = chain
        self.window_bottom = window_bottom


class ChainIdMismatch(ChainError):
    """The endpoint answers for another chain than the configuration says."""

    def __init__(self, chain: str, endpoint: str, expected: int, actual: int) -> None:
        super().__init__(
            f"chain {chain!r}: endpoint {redact_url(endpoint)} serves chain id {actual}, "
            f"but the config says chain_id = {expected}"
        )
        self.expected = expected
        self.actual = actual


class BranchMoved(ChainError):
    """The node's chain no longer holds the blocks a decision rests on (or not yet): wait."""


class ProofUnavailable(ChainError):
    """The node's answers do not reproduce the header they should prove against."""


# -- tries ------------------------------------------------------------------------------------
