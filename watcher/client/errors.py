"""The errors of :mod:`watcher.client`: one base type, so a caller catches one thing.

A caller needs to tell "the daemon is not there" (retry later, page someone) from "the daemon
said no" (fix the request): :class:`Unreachable` and :class:`Rejected`.
"""

from __future__ import annotations


class ClientError(Exception):
    """Any failure of a client call: ``status`` is the HTTP status (None if there was none),
    ``fields`` the request fields the daemon named (``{"error", "fields"}`` answers), ``body``
    the whole error answer (a refused takeover names the holder and the guard's verdict)."""

    def __init__(
        self,
        message: str,
        status: int | None = None,
        fields: list[str] | None = None,
        body: dict[str, object] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.fields = list(fields or [])
        self.body = dict(body or {})


class Unreachable(ClientError):
    """No answer: the daemon is down, the URL is wrong, or it answered 5xx / not JSON."""


class Rejected(ClientError):
    """The daemon answered 4xx: the request is wrong (unknown id, bad hash, unknown chain)."""
