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

A receiver cannot hold a worker: the whole attempt (connect, send, the answer's status and
headers, the little of its body that is read) has one deadline, ``[delivery] timeout_s``.
httpx's timeouts are per read, so a receiver answering a byte every two seconds never
tripped them; the attempt runs on the worker's own event loop instead, under
``asyncio.timeout``, which cancels it wherever it is. Only the status is used, so at most
:data:`MAX_ANSWER_BYTES` of the answer's body are read (raw: never decompressed); the rest
is never read, and its connection is closed rather than kept alive.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections import OrderedDict
from collections.abc import Coroutine
from typing import Any

import httpx

from watcher.destinations import AllowList, Resolver, check_url, resolve

TLS_CLIENTS = 32
"""``https`` host names a worker keeps a kept-alive client for (the least recently used
one is closed beyond that)."""

MAX_ANSWER_BYTES = 16_384
"""Most of an answer's body read (to reuse its connection); a longer one is left unread."""


class AttemptDeadline(Exception):
    """The attempt did not finish within its deadline (a slow or trickling receiver)."""


class DeliveryClients:
    """A delivery worker's HTTP clients: one for plain ``http``, one per ``https`` host name
    (module doc). Not thread-safe: each worker has its own, used on its own event loop."""

    def __init__(self, timeout_s: float, limit: int = TLS_CLIENTS) -> None:
        self.timeout_s = timeout_s
        self.limit = limit
        self._plain: httpx.AsyncClient | None = None
        self._tls: OrderedDict[str, httpx.AsyncClient] = OrderedDict()
        self._closing: list[httpx.AsyncClient] = []

    def _new(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False)

    def for_url(self, url: httpx.URL) -> httpx.AsyncClient:
        """The client a request to ``url`` goes out on."""
        if url.scheme != "https":
            if self._plain is None:
                self._plain = self._new()
            return self._plain
        client = self._tls.pop(url.host, None) or self._new()
        self._tls[url.host] = client  # most recently used last
        while len(self._tls) > self.limit:
            _, oldest = self._tls.popitem(last=False)
            self._closing.append(oldest)
        return client

    async def close_evicted(self) -> None:
        """Close the clients :meth:`for_url` let go of (on the loop they were used on)."""
        while self._closing:
            await self._closing.pop().aclose()

    async def aclose(self) -> None:
        """Close every client (the worker is stopping), on the loop they were used on."""
        for client in [self._plain, *self._tls.values(), *self._closing]:
            if client is not None:
                await client.aclose()
        self._plain, self._tls, self._closing = None, OrderedDict(), []


class AttemptLoop:
    """A delivery worker's event loop and clients: :meth:`run` runs one attempt to its end
    or its deadline. Not thread-safe: each worker has its own."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.loop = asyncio.new_event_loop()
        self.clients = DeliveryClients(timeout_s)

    def run(self, attempt: Coroutine[Any, Any, int]) -> int:
        """Run ``attempt`` (a :func:`post_checked` over :attr:`clients`) to its end: the
        status it returns, or :class:`AttemptDeadline` once ``timeout_s`` has passed."""
        try:
            return self.loop.run_until_complete(_within(self.timeout_s, attempt))
        except TimeoutError:
            raise AttemptDeadline(
                f"no complete answer within the attempt's deadline of {self.timeout_s:g} s"
            ) from None

    def close(self) -> None:
        """Close the clients and the loop (the worker is stopping)."""
        self.loop.run_until_complete(self.clients.aclose())
        self.loop.close()

    def __enter__(self) -> AttemptLoop:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _within(timeout_s: float, attempt: Coroutine[Any, Any, int]) -> int:
    async with asyncio.timeout(timeout_s):
        return await attempt


async def post_checked(
    clients: DeliveryClients,
    url: str,
    allow: AllowList,
    content: bytes,
    headers: dict[str, str],
    resolver: Resolver = resolve,
) -> int:
    """POST ``content`` to ``url`` if its addresses are allowed now, at the address checked,
    and return the answer's status (at most :data:`MAX_ANSWER_BYTES` of its body read);
    raises :class:`~watcher.destinations.DestinationRefused` (nothing sent) if not, or
    :class:`~watcher.destinations.Unresolvable` if its host resolves to nothing."""
    addresses = check_url(url, allow, resolver)
    target = httpx.URL(url)
    client = clients.for_url(target)
    await clients.close_evicted()
    extensions: dict[str, Any] = {}
    sent = headers
    if not _is_literal(target.host):
        pinned = target.copy_with(host=str(addresses[0]))
        sent = {**headers, "Host": target.netloc.decode("ascii").rpartition("@")[2]}
        if target.scheme == "https":  # the name in the handshake, and the certificate's check
            extensions = {"sni_hostname": target.host}
        target = pinned
    request = client.build_request(
        "POST", target, content=content, headers=sent, extensions=extensions
    )
    answer = await client.send(request, stream=True)
    try:
        read = 0
        async for chunk in answer.aiter_raw():
            read += len(chunk)
            if read > MAX_ANSWER_BYTES:
                break  # the rest stays unread; closing drops the connection
        return answer.status_code
    finally:
        await answer.aclose()


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
