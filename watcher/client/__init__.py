"""``watcher.client``: the finality daemon for programs (backends, bridges, agents).

::

    from watcher.client import FinalityClient, verify

    with FinalityClient("http://127.0.0.1:8710") as client:
        view = client.register("local", "0x…", confirmations=3)
        final = client.wait(view["settlement_id"], timeout_s=600)  # SSE, not a poll loop
        if final["verdict"] == "FINALITY_CONFIRMED":
            assert verify(client.receipt(final["settlement_id"])).valid

A library callers import: it depends on httpx and guard/ (offline verification) only, never
on the daemon's modules. Docs: ``docs/client.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watcher.client.async_client import AsyncFinalityClient
    from watcher.client.common import TERMINAL, PaymentOptions, RegistrationOptions
    from watcher.client.errors import ClientError, Rejected, Unreachable
    from watcher.client.offline import Verification, verify
    from watcher.client.sync_client import FinalityClient
    from watcher.client.workflows import verify_workflow

_HOME = {
    "AsyncFinalityClient": "async_client",
    "TERMINAL": "common",
    "RegistrationOptions": "common",
    "PaymentOptions": "common",
    "ClientError": "errors",
    "Rejected": "errors",
    "Unreachable": "errors",
    "FinalityClient": "sync_client",
    "Verification": "offline",
    "verify": "offline",
    "verify_workflow": "workflows",
}
"""Where each re-exported name lives: imported on first use, so a caller that needs only
the HTTP calls does not pay for guard's verification code at start-up."""

__all__ = [
    "TERMINAL",
    "AsyncFinalityClient",
    "ClientError",
    "FinalityClient",
    "PaymentOptions",
    "RegistrationOptions",
    "Rejected",
    "Unreachable",
    "Verification",
    "verify",
    "verify_workflow",
]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'watcher.client' has no attribute {name!r}")
    return getattr(importlib.import_module(f"watcher.client.{_HOME[name]}"), name)
