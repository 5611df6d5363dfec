"""One POST to a destination checked at the moment it is sent.

A ``commit_url`` was checked at registration, an alert URL at config load, but DNS can
change in between (a name that resolved to a public address then may resolve to
``169.254.169.254`` now). So every attempt resolves the host again and checks every
address (:func:`watcher.destinations.check_url`) before a byte is sent, and the request
then goes to the address that was checked, so a second lookup by the HTTP client cannot be
answered differently (DNS rebinding): ``Host`` names the host as written, and over
``https://`` the TLS handshake names it too (SNI) and the certificate is verified against
that name, not the address.

Kept-alive connections are pooled by address and port, not by name: one opened to
``a.example`` would carry a request for ``b.example`` at the same address, under a
certificate verified for ``a.example`` only. So each ``https`` host name gets its own client
(:class:`DeliveryClients`); plain ``http`` carries no identity and shares one.

Redirects are never followed (every client is built with ``follow_redirects=False``): a 3xx
is a failed attempt, never a request to wherever it points.
"""

from __future__ import annotations

import ipaddress
from collections import OrderedDict

import httpx

from watcher.destinations import AllowList, Resolver, check_url, resolve

TLS_CLIENTS = 32
"""``https`` host names a worker keeps a kept-alive client for (the least recently used
one is closed beyond that)."""


class DeliveryClients:
    """A delivery worker's HTTP clients: one for plain ``http``, one per ``https`` host name
    (module doc). Not thread-safe: each worker has its own."""

    def __init__(self, timeout_s: float, limit: int = TLS_CLIENTS) -> None:
        self.timeout_s = timeout_s
        self.limit = limit
        self._plain: httpx.Client | None = None
        self._tls: OrderedDict[str, httpx.Client] = OrderedDict()

    def _new(self) -> httpx.Client:
        return httpx.Client(timeout=self.timeout_s, follow_redirects=False)

    def for_url(self, url: httpx.URL) -> httpx.Client:
        """The client a request to ``url`` goes out on."""
        if url.scheme != "https":
            if self._plain is None:
                self._plain = self._new()
            return self._plain
        client = self._tls.pop(url.host, None) or self._new()
        self._tls[url.host] = client  # most recently used last
        while len(self._tls) > self.limit:
            _, oldest = self._tls.popitem(last=False)
            oldest.close()
        return client

    def close(self) -> None:
        """Close every client (the worker is stopping)."""
        for client in [self._plain, *self._tls.values()]:
            if client is not None:
                client.close()
        self._plain, self._tls = None, OrderedDict()

    def __enter__(self) -> DeliveryClients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def post_checked(
    clients: DeliveryClients,
    url: str,
    allow: AllowList,
    content: bytes,
    headers: dict[str, str],
    resolver: Resolver = resolve,
) -> httpx.Response:
    """POST ``content`` to ``url`` if its addresses are allowed now, at the address checked;
    raises :class:`~watcher.destinations.DestinationRefused` (nothing sent) if not, or
    :class:`~watcher.destinations.Unresolvable` if its host resolves to nothing."""
    addresses = check_url(url, allow, resolver)
    target = httpx.URL(url)
    client = clients.for_url(target)
    if _is_literal(target.host):
        return client.post(target, content=content, headers=headers)
    pinned = target.copy_with(host=str(addresses[0]))
    host = target.netloc.decode("ascii").rpartition("@")[2]
    sent = {**headers, "Host": host}
    if target.scheme == "https":  # the name in the handshake, and the certificate's check
        return client.post(
            pinned, content=content, headers=sent, extensions={"sni_hostname": target.host}
        )
    return client.post(pinned, content=content, headers=sent)


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
