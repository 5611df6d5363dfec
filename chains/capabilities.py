"""Which optional JSON-RPC methods each endpoint offers, learnt from its own answers.

Not every node implementation offers every method: Hardhat (EDR) and Ganache 7 have neither
``eth_getBlockReceipts`` nor ``eth_getRawTransactionByHash``, and many providers switch
methods off per plan. They say so in different words: ``-32601`` (method not found),
``-32004`` (method not supported, EIP-1474), Ganache's ``-32700`` "The method X does not
exist/is not available", providers' ``-32000`` "unsupported method". Each such answer is
remembered per endpoint, so the client uses the standard-calls fallback at once next time
instead of asking (and failing) again on every poll.

Only an answer that says the *method* is not there counts: "header not found", a rate
limit, a timeout or any other error is transient and is raised as it is.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any

NOT_OFFERED_CODES = frozenset({-32601, -32004})
"""JSON-RPC codes that mean "no such method here" whatever the message says."""

_METHOD_MISSING = re.compile(
    r"\b(not found|not supported|unsupported|does not exist|not available|unavailable"
    r"|not implemented|unknown|not allowed|not whitelisted|disabled)\b",
    re.IGNORECASE,
)


def not_offered(method: str, code: int, message: str) -> bool:
    """True when the error ``code``/``message`` answering ``method`` says the endpoint does
    not offer the method (rather than failing this one call)."""
    if code in NOT_OFFERED_CODES:
        return True
    text = message.lower()
    names_method = "method" in text or method.lower() in text
    return names_method and _METHOD_MISSING.search(text) is not None


def error_not_offered(method: str, answer: Any) -> bool:
    """:func:`not_offered` for one raw JSON-RPC answer (False when it is no error)."""
    if not isinstance(answer, Mapping):
        return False
    error = answer.get("error")
    if not isinstance(error, Mapping):
        return False
    code = error.get("code")
    return isinstance(code, int) and not_offered(method, code, str(error.get("message", "")))


class Capabilities:
    """Per endpoint, the methods it said it does not offer, with its words (thread-safe)."""

    def __init__(self) -> None:
        self._lacking: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def lacks(self, endpoint: str, method: str) -> bool:
        """True once ``endpoint`` said it does not offer ``method``."""
        with self._lock:
            return method in self._lacking.get(endpoint, {})

    def mark(self, endpoint: str, method: str, reason: str) -> None:
        """Remember that ``endpoint`` does not offer ``method`` (``reason``: its answer)."""
        with self._lock:
            self._lacking.setdefault(endpoint, {})[method] = reason[:200]

    def lacking(self, endpoint: str) -> dict[str, str]:
        """The methods ``endpoint`` does not offer, each with the node's reason."""
        with self._lock:
            return dict(self._lacking.get(endpoint, {}))
