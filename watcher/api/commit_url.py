"""The ``commit_url`` of a registration: where the daemon will POST on the caller's behalf.

Checked by :mod:`watcher.destinations` before anything is stored, so a caller cannot make
the daemon probe the operator's network (server-side request forgery): a URL with
credentials, or whose host is (or resolves to) a link-local, private, loopback, unspecified
or otherwise non-public address is a 422 naming ``commit_url`` and the reason, unless
``[delivery] allow_destinations`` names it (loopback is allowed when every chain is a local
development chain). The answer says which rule refused the URL, never what its host
resolved to. A host that does not resolve now is accepted: DNS may be down for a moment,
and every delivery attempt checks again (watcher/delivery/outbound.py).
"""

from __future__ import annotations

from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError
from watcher.destinations import CachingResolver, DestinationRefused, Unresolvable, check_url

RESOLVER = CachingResolver()
"""Registration-time lookups, remembered for 10 s (a batch names one host many times)."""


def check_commit_url(deps: ApiDeps, url: str | None) -> None:
    """Raise :class:`ApiError` (422, field ``commit_url``) if ``url`` may not be sent to."""
    if url is None:
        return
    try:
        check_url(url, deps.config.destinations(), RESOLVER)
    except Unresolvable:
        return
    except DestinationRefused as exc:
        raise ApiError(422, f"commit_url: {exc}", fields=["commit_url"]) from None
