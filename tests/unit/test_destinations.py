"""Which destinations the daemon may send to (watcher/destinations.py): a table of
addresses, allow-list entries and URLs. Resolution is a function handed in, so the table
needs no DNS; tests/e2e/test_ssrf.py checks the same through the daemon."""

from __future__ import annotations

import ipaddress

import pytest

from watcher.destinations import (
    AllowList,
    CachingResolver,
    DestinationRefused,
    IPAddress,
    Resolver,
    Unresolvable,
    address_class,
    check_entries,
    check_url,
)


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("8.8.8.8", None),
        ("1.1.1.1", None),
        ("2606:4700:4700::1111", None),
        ("169.254.169.254", "link-local"),
        ("169.254.0.1", "link-local"),
        ("fe80::1", "link-local"),
        ("febf:ffff::1", "link-local"),
        ("10.0.0.1", "private"),
        ("10.255.255.255", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.254", "private"),
        ("172.32.0.1", None),
        ("172.15.255.255", None),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("fc00::1", "private"),
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("100.64.0.1", "not globally reachable (shared address space (carrier-grade NAT))"),
        ("100.127.255.254", "not globally reachable (shared address space (carrier-grade NAT))"),
        ("192.0.2.1", "not globally reachable (documentation (TEST-NET-1))"),
        ("198.18.0.1", "not globally reachable (benchmarking)"),
        ("198.19.255.254", "not globally reachable (benchmarking)"),
        ("2001:db8::1", "not globally reachable (documentation)"),
        # IANA's special-purpose registries, where Python 3.11's is_global says "global"
        ("192.0.0.8", "not globally reachable (IETF protocol assignments)"),
        ("192.0.0.9", "not globally reachable (IETF protocol assignments)"),
        ("192.0.0.170", "not globally reachable (IETF protocol assignments)"),
        ("192.88.99.1", "not globally reachable (deprecated 6to4 relay anycast)"),
        ("0.1.2.3", 'not globally reachable ("this network")'),
        ("245.1.2.3", "reserved"),
        ("64:ff9b:1::1", "not globally reachable (local-use IPv4/IPv6 translation)"),
        ("64:ff9b::c000:8", "not globally reachable (IETF protocol assignments)"),  # NAT64
        ("64:ff9b::6440:1", "not globally reachable (shared address space (carrier-grade NAT))"),
        (
            "2001::1",
            "not globally reachable (IETF protocol assignments (Teredo, ORCHID, benchmarking))",
        ),
        (
            "2001:20::1",
            "not globally reachable (IETF protocol assignments (Teredo, ORCHID, benchmarking))",
        ),
        ("3fff::1", "not globally reachable (documentation)"),
        ("5f00::1", "not globally reachable (segment routing SIDs)"),
        ("100::1", "not globally reachable (discard-only)"),
        ("4000::1", "reserved"),  # outside 2000::/3: not allocated for global unicast
        ("::808:808", "reserved"),  # deprecated IPv4-compatible form
        ("2620:4f:8000::1", None),  # AS112 direct delegation: globally reachable
        ("192.31.196.1", None),  # AS112: globally reachable
        ("::ffff:169.254.169.254", "link-local"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:0.0.0.0", "unspecified"),
        ("::ffff:8.8.8.8", None),
        ("2002:a00:1::1", "private"),  # 6to4 of 10.0.0.1
        ("2002:7f00:1::1", "loopback"),  # 6to4 of 127.0.0.1
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of 169.254.169.254
        ("64:ff9b::808:808", None),  # NAT64 of 8.8.8.8
    ],
)
def test_address_classes(address: str, why: str | None) -> None:
    assert address_class(ipaddress.ip_address(address)) == why


def fixed(*addresses: str) -> Resolver:
    """A resolver answering ``addresses`` for every host."""
    ips = [ipaddress.ip_address(a) for a in addresses]

    def resolve(host: str, port: int) -> list[IPAddress]:
        return ips

    return resolve


PUBLIC = fixed("93.184.216.34")


@pytest.mark.parametrize(
    ("url", "resolver", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data/", None, "link-local"),
        ("http://10.0.0.1:6379/", None, "private"),
        ("http://[fd00::1]/", None, "private"),
        ("http://0.0.0.0/", None, "unspecified"),
        ("http://[::]/", None, "unspecified"),
        ("http://[::ffff:169.254.169.254]/", None, "link-local"),
        ("http://user:pw@example.com/", PUBLIC, "credentials"),
        ("http://user@example.com/", PUBLIC, "credentials"),
        ("http://rebound.example/", fixed("93.184.216.34", "127.0.0.1"), "loopback"),
        ("http://localhost:8080/hook", fixed("127.0.0.1", "::1"), "loopback"),
        ("http://nowhere.invalid/", fixed(), "does not resolve"),
        ("http://host:99999/", PUBLIC, "not a valid URL"),
    ],
)
def test_refused_urls_name_the_reason(url: str, resolver: Resolver | None, reason: str) -> None:
    with pytest.raises(DestinationRefused, match=reason):
        check_url(url, AllowList(), resolver or fixed())


def test_an_unresolvable_host_is_not_refused_for_good() -> None:
    with pytest.raises(Unresolvable):
        check_url("http://nowhere.invalid/", AllowList(), fixed())


def test_a_public_destination_is_allowed() -> None:
    assert check_url("https://shop.example/finality", AllowList(), PUBLIC)


def test_dev_chains_allow_loopback_and_nothing_else() -> None:
    dev = AllowList(loopback=True)
    loop = fixed("127.0.0.1")
    assert check_url("http://127.0.0.1:9000/hook", dev, loop)
    assert check_url("http://[::1]:9000/hook", dev, fixed("::1"))
    for url, resolver in [
        ("http://169.254.169.254/", fixed("169.254.169.254")),
        ("http://10.0.0.1/", fixed("10.0.0.1")),
        ("http://0.0.0.0/", fixed("0.0.0.0")),
        ("http://u:p@127.0.0.1/", loop),
    ]:
        with pytest.raises(DestinationRefused):
            check_url(url, dev, resolver)


@pytest.mark.parametrize(
    ("entries", "url", "address", "allowed"),
    [
        (["10.0.0.5"], "http://10.0.0.5:6379/", "10.0.0.5", True),
        (["10.0.0.5"], "http://10.0.0.6/", "10.0.0.6", False),
        (["10.0.0.5:8443"], "https://10.0.0.5:8443/", "10.0.0.5", True),
        (["10.0.0.5:8443"], "https://10.0.0.5/", "10.0.0.5", False),
        (["10.1.0.0/16"], "http://10.1.200.3/", "10.1.200.3", True),
        (["10.1.0.0/16"], "http://10.2.0.1/", "10.2.0.1", False),
        (["10.1.0.0/16"], "http://[::ffff:10.1.0.9]/", "::ffff:10.1.0.9", True),
        (["hooks.internal:8443"], "https://hooks.internal:8443/x", "10.9.9.9", True),
        (["hooks.internal:8443"], "https://HOOKS.internal.:8443/x", "10.9.9.9", True),
        (["hooks.internal:8443"], "https://hooks.internal/x", "10.9.9.9", False),
        (["hooks.internal"], "http://other.internal/", "10.9.9.9", False),
        (["[fd00::1]:443"], "https://[fd00::1]/", "fd00::1", True),
        (["fd00::/8"], "http://[fd12::1]/", "fd12::1", True),
        (["127.0.0.1"], "http://127.0.0.1:9/", "127.0.0.1", True),
        (["127.0.0.1"], "http://u:p@127.0.0.1:9/", "127.0.0.1", False),  # credentials: never
    ],
)
def test_the_allow_list(entries: list[str], url: str, address: str, allowed: bool) -> None:
    allow = AllowList(entries)
    if allowed:
        assert check_url(url, allow, fixed(address))
    else:
        with pytest.raises(DestinationRefused):
            check_url(url, allow, fixed(address))


def test_unreadable_allow_list_entries_are_named() -> None:
    assert check_entries(["10.0.0.5", "hooks.internal:8443", "10.1.0.0/16", "[::1]:80"]) == []
    problems = check_entries(["", "a b", "user@host", "host:0", "host:http", "[::1]:99999"])
    assert len(problems) == 6
    assert all("expected" in p or "port" in p for p in problems)


def test_the_caching_resolver_asks_once_per_host_while_fresh() -> None:
    asked: list[str] = []
    now = [0.0]

    def counting(host: str, port: int) -> list[IPAddress]:
        asked.append(host)
        if host == "gone.example":
            raise OSError("no such host")
        return [ipaddress.ip_address("93.184.216.34")]

    cache = CachingResolver(ttl_s=10, resolver=counting, clock=lambda: now[0])
    for _ in range(3):
        assert cache("shop.example", 443) == [ipaddress.ip_address("93.184.216.34")]
        assert cache("gone.example", 443) == []
    assert asked == ["shop.example", "gone.example"]
    now[0] = 10.5  # stale: asked again
    cache("shop.example", 443)
    assert asked[-1] == "shop.example" and len(asked) == 3


@pytest.mark.parametrize("url", ["http://0177.0.0.1/", "http://2130706433/", "http://0x7f000001/"])
def test_odd_spellings_of_loopback_are_resolved_and_refused(url: str) -> None:
    with pytest.raises(DestinationRefused, match="loopback"):
        check_url(url, AllowList())  # the real getaddrinfo: numeric forms need no DNS


def test_a_zone_id_does_not_hide_a_link_local_address() -> None:
    with pytest.raises(DestinationRefused, match="link-local"):
        check_url("http://[fe80::1%25eth0]/", AllowList(loopback=True))


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://example.com/a\r\nX: 1", "control character"),
        ("http://example.com/\x00", "control character"),
        ("http://example.com/" + "a" * 65_536, "longer than 65536 bytes"),
        ("ftp://example.com/", "http:// or https://"),
    ],
)
def test_a_url_that_cannot_be_a_request_line_is_refused_before_any_lookup(
    url: str, reason: str
) -> None:
    def never(host: str, port: int) -> list[IPAddress]:
        raise AssertionError("resolved a URL that is refused as written")

    with pytest.raises(DestinationRefused, match=reason):
        check_url(url, AllowList(), never)
