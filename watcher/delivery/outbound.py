"""One POST to a destination checked at the moment it is sent.

A ``commit_url`` was checked at registration, an alert URL at config load, but DNS can
change in between (a name that resolved to a public address then may resolve to
``169.254.169.254`` now). So every attempt resolves the host again and checks every
address (:func:`watcher.destinations.check_url`) before a byte is sent. For ``http://`` the
request then goes to the address that was checked (``Host`` names the host as written), so
a second lookup by the HTTP client cannot be answered differently (DNS rebinding); an
``https://`` request keeps the name, since certificate verification ties it to the host.

Redirects are never followed (the client is built with ``follow_redirects=False``): a 3xx is
a failed attempt, never a request to wherever it points.
"""

from __future__ import annotations

import ipaddress

import httpx

from watcher.destinations import AllowList, Resolver, check_url, resolve


def post_checked(
    client: httpx.Client,
    url: str,
    allow: AllowList,
    content: bytes,
    headers: dict[str, str],
    resolver: Resolver = resolve,
) -> httpx.Response:
    """POST ``content`` to ``url`` if its addresses are allowed now; raises
    :class:`~watcher.destinations.DestinationRefused` (nothing sent) if not, or
    :class:`~watcher.destinations.Unresolvable` if its host resolves to nothing."""
    addresses = check_url(url, allow, resolver)
    target = httpx.URL(url)
    if target.scheme != "http" or _is_literal(target.host):
        return client.post(target, content=content, headers=headers)
    pinned = target.copy_with(host=str(addresses[0]))
    host = target.netloc.decode("ascii").rpartition("@")[2]
    return client.post(pinned, content=content, headers={**headers, "Host": host})


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
