"""Where the daemon may send a request: the check behind every outbound call it makes for
someone else (a caller's ``commit_url``, an operator's alert URLs).

A ``commit_url`` is chosen by whoever registers a settlement. Unchecked, the daemon would
POST wherever it points, from inside the operator's network: the cloud metadata service
(``http://169.254.169.254/``), a Redis on ``10.0.0.1:6379``, the daemon's own host — and
the delivery's status would tell the caller what answered (server-side request forgery).
So a destination is refused when any address its host resolves to is

* ``link-local`` (169.254.0.0/16, fe80::/10: metadata services live there),
* ``private`` (10/8, 172.16/12, 192.168/16, fc00::/7),
* ``loopback`` (127/8, ::1),
* ``unspecified`` (0.0.0.0, ::: both reach the local host),
* ``multicast``, ``reserved`` (240/4, broadcast, IPv6 outside 2000::/3), or in a block of
  IANA's special-purpose address registries that is not globally reachable (the IPv4 and
  IPv6 registries as of 2025, :data:`SPECIAL_PURPOSE`: 100.64/10, 192.0.0/24, 198.18/15,
  documentation ranges, Teredo, ORCHID...). The table is ours, not ``ipaddress.is_global``:
  Python 3.11's list misses blocks (it takes ``192.0.0.8`` for a public address),

an IPv6 address that embeds an IPv4 one (``::ffff:10.0.0.1``, 6to4, NAT64) being judged by
the IPv4 address inside; and a URL with credentials (``user:pw@``) is refused always (they
would be stored, shown back and sent on every retry).

:class:`AllowList` is the way out for destinations an operator means
(``[delivery] allow_destinations``): an IP address (``"10.0.0.5"``), a network
(``"10.1.0.0/16"``, ``"fd00::/8"``) or a host name (``"hooks.internal"``), each optionally
with a port (``"10.0.0.5:8443"``, ``"[fd00::1]:443"``, ``"hooks.internal:8443"``); a name
allows every address it resolves to, an address or network only itself. When every chain is
a local development chain, loopback is allowed as well (``make run`` with a receiver on
localhost); nothing else is.

This module decides; it resolves only through the ``resolve`` function it is handed
(:func:`resolve` by default), so the table of cases is a plain unit test.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[IPAddress]]
"""(host, port) → the addresses a connection could go to; :class:`OSError` if none."""

DEFAULT_PORTS = {"http": 80, "https": 443}

_PRIVATE = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_BROADCAST = ipaddress.IPv4Address("255.255.255.255")
_GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")

SPECIAL_PURPOSE: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(block), name)
    for block, name in (
        # IANA IPv4 Special-Purpose Address Registry: blocks whose "Globally Reachable" is
        # False or N/A (the private, loopback, link-local and 240/4 ones are named above).
        ("0.0.0.0/8", '"this network"'),
        ("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation (TEST-NET-1)"),
        ("192.88.99.0/24", "deprecated 6to4 relay anycast"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation (TEST-NET-2)"),
        ("203.0.113.0/24", "documentation (TEST-NET-3)"),
        # IANA IPv6 Special-Purpose Address Registry (NAT64's 64:ff9b::/96, 6to4 and mapped
        # addresses are judged by the IPv4 address inside: embedded_v4).
        ("64:ff9b:1::/48", "local-use IPv4/IPv6 translation"),
        ("100::/64", "discard-only"),
        ("100:0:0:1::/64", "dummy prefix"),
        ("2001::/23", "IETF protocol assignments (Teredo, ORCHID, benchmarking)"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing SIDs"),
    )
)
"""IANA special-purpose blocks a destination may not be in (besides private, loopback,
link-local, unspecified, multicast and reserved, which are named by their own class). The
few globally reachable anycast addresses inside 192.0.0.0/24 and 2001::/23 (PCP, TURN,
AS112, AMT) are refused with their block: nobody's webhook lives there."""


MAX_URL_BYTES = 65_536
"""Longest destination URL (UTF-8 bytes): longer is a mistake or an attack, never a webhook."""


def url_text_problem(url: str) -> str | None:
    """Why ``url`` cannot be sent to as written (scheme, length, control characters), or
    None. CR, LF or NUL in a URL would never make a valid request line (and could split
    one), so it is refused where it is given, not retried at every delivery."""
    if not url.startswith(("http://", "https://")):
        return "must be an http:// or https:// URL"
    if len(url.encode("utf-8", "surrogatepass")) > MAX_URL_BYTES:
        return f"is longer than {MAX_URL_BYTES} bytes"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return "holds a control character (CR, LF, NUL, TAB...)"
    return None


class DestinationRefused(ValueError):
    """The URL may not be sent to; the message names why (no resolution details)."""


class Unresolvable(DestinationRefused):
    """The URL's host resolves to nothing now: not refused for good (DNS may come back),
    so a registration accepts it and a delivery retries; its addresses are checked when
    they exist."""


def embedded_v4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, 6to4, NAT64), if any."""
    if isinstance(ip, ipaddress.IPv4Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_class(ip: IPAddress) -> str | None:
    """Why ``ip`` is not a public destination (``"loopback"``, ``"link-local"``...), or None
    for a globally routable unicast address."""
    inner = embedded_v4(ip)
    if inner is not None:
        return address_class(inner)
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if any(ip in net for net in _PRIVATE if net.version == ip.version):
        return "private"
    for block, name in SPECIAL_PURPOSE:
        if block.version == ip.version and ip in block:
            return f"not globally reachable ({name})"
    if ip.is_reserved or (isinstance(ip, ipaddress.IPv4Address) and ip == _BROADCAST):
        return "reserved"
    if isinstance(ip, ipaddress.IPv6Address) and ip not in _GLOBAL_UNICAST_V6:
        return "reserved"
    if not ip.is_global:
        return "not globally reachable"
    return None


@dataclass(frozen=True)
class _Entry:
    """One allow-list entry: a host name or a network, and a port (None: any)."""

    name: str | None
    network: IPNetwork | None
    port: int | None

    def names(self, host: str, port: int) -> bool:
        return self.name is not None and self.name == host and self.port in (None, port)

    def covers(self, ip: IPAddress, port: int) -> bool:
        if self.network is None or self.port not in (None, port):
            return False
        inner = embedded_v4(ip)
        return ip in self.network or (inner is not None and inner in self.network)


def _parse_entry(text: str) -> _Entry:
    """``"10.0.0.5"``, ``"10.1.0.0/16"``, ``"hooks.internal:8443"``, ``"[fd00::1]:443"``."""
    value = text.strip()
    if not value or any(c in value for c in "@ \t"):
        raise ValueError(f"{text!r}: expected an IP address, a network or a host name")
    try:
        return _Entry(None, ipaddress.ip_network(value, strict=False), None)  # no port
    except ValueError:
        pass
    host, port = value, None
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = _parse_port(text, rest.removeprefix(":")) if rest else None
    elif value.count(":") == 1:
        host, _, port_text = value.partition(":")
        port = _parse_port(text, port_text)
    try:
        return _Entry(None, ipaddress.ip_network(host, strict=False), port)
    except ValueError:
        pass
    name = host.lower().rstrip(".")
    if not name or not all(part and len(part) <= 63 for part in name.split(".")):
        raise ValueError(f"{text!r}: expected an IP address, a network or a host name")
    return _Entry(name, None, port)


def _parse_port(text: str, port: str) -> int:
    if not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{text!r}: the port must be an integer in 1..65535")
    return int(port)


class AllowList:
    """Destinations allowed although their addresses are not public (see the module)."""

    def __init__(self, entries: Iterable[str] = (), *, loopback: bool = False) -> None:
        """``entries`` as :func:`check_entries` accepts them; ``loopback``: allow loopback
        addresses too (every chain is a local development chain)."""
        self.entries = tuple(_parse_entry(e) for e in entries)
        self.loopback = loopback

    def allows(self, host: str, port: int, ip: IPAddress, why: str) -> bool:
        """Whether ``ip`` (of ``host``:``port``), refused as ``why``, is allowed anyway."""
        if why == "loopback" and self.loopback:
            return True
        name = host.lower().rstrip(".")
        return any(e.names(name, port) or e.covers(ip, port) for e in self.entries)


def check_entries(entries: Iterable[str]) -> list[str]:
    """One message per allow-list entry that cannot be read (empty when all can)."""
    problems = []
    for entry in entries:
        try:
            _parse_entry(entry)
        except ValueError as exc:
            problems.append(str(exc))
    return problems


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (getaddrinfo, TCP); :class:`OSError` if none."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


class CachingResolver:
    """A resolver that remembers each answer (or its absence) for ``ttl_s`` seconds: a batch
    of registrations naming one ``commit_url`` host costs one lookup, not one each (a
    failing lookup can take 200 ms). Deliveries resolve afresh at every attempt."""

    def __init__(
        self,
        ttl_s: float = 10.0,
        resolver: Resolver = resolve,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self.resolver = resolver
        self.clock = clock
        self._answers: dict[tuple[str, int], tuple[float, list[IPAddress]]] = {}
        self._lock = threading.Lock()

    def __call__(self, host: str, port: int) -> list[IPAddress]:
        """``host``'s addresses, from the cache while fresh; [] when it does not resolve."""
        now = self.clock()
        with self._lock:
            cached = self._answers.get((host, port))
        if cached is not None and now - cached[0] < self.ttl_s:
            return cached[1]
        try:
            addresses = list(self.resolver(host, port))
        except (OSError, UnicodeError, ValueError):
            addresses = []
        with self._lock:
            if len(self._answers) >= MAX_CACHED:
                self._answers.clear()
            self._answers[(host, port)] = (now, addresses)
        return addresses


MAX_CACHED = 4096
"""Hosts a :class:`CachingResolver` remembers before it starts over."""


def destination_of(url: str) -> str:
    """What one destination is (a per-destination limit counts it): scheme, host and port."""
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme, 0)
    except ValueError:
        return url
    return f"{parts.scheme}://{parts.hostname}:{port}"


def check_url(url: str, allow: AllowList, resolver: Resolver = resolve) -> list[IPAddress]:
    """The addresses ``url`` may be sent to; :class:`DestinationRefused` naming the reason
    if any is refused, if it carries credentials, or if its host does not resolve."""
    problem = url_text_problem(url)
    if problem is not None:
        raise DestinationRefused(problem)
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme.lower(), 0)
    except ValueError:
        raise DestinationRefused("not a valid URL") from None
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise DestinationRefused("must not carry credentials (user:password@)")
    host = parts.hostname
    if not host or not port:
        raise DestinationRefused("needs an http:// or https:// URL with a host")
    try:
        addresses = [ipaddress.ip_address(host.split("%", 1)[0])]  # a literal: no lookup
    except ValueError:
        addresses = _resolved(host, port, resolver)
    for ip in addresses:
        why = address_class(ip)
        if why is not None and not allow.allows(host, port, ip, why):
            raise DestinationRefused(
                f"points at a {why} address, which is not allowed (list it in "
                "[delivery] allow_destinations if it is meant)"
            )
    return addresses


def _resolved(host: str, port: int, resolver: Resolver) -> list[IPAddress]:
    """The host's addresses; refused (without the resolver's words) if there are none."""
    try:
        addresses = list(resolver(host, port))
    except (OSError, UnicodeError, ValueError):
        addresses = []
    if not addresses:
        raise Unresolvable("its host does not resolve")
    return addresses
