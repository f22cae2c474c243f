"""mcptax.outbound.policy: every address class the policy refuses, the operator's allowed networks,
and resolving once. The expected classes are written from the IANA special-purpose registries."""

from __future__ import annotations

import dataclasses
import ipaddress

import pytest

from mcptax.outbound import OutboundPolicy, OutboundRefused, classify, embedded_ipv4, parse_networks

INWARD = [
    ("169.254.169.254", "link-local"),  # cloud metadata
    ("100.64.1.1", "shared (CGNAT)"),
    ("100.127.255.254", "shared (CGNAT)"),
    ("127.0.0.1", "loopback"),
    ("127.8.9.10", "loopback"),
    ("10.0.0.5", "private"),
    ("10.255.255.255", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.1", "private"),
    ("192.168.1.1", "private"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("198.18.0.1", "benchmarking"),
    ("192.0.2.10", "documentation"),
    ("192.0.0.8", "reserved"),
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("fe80::1", "link-local"),
    ("ff02::1", "multicast"),
    ("2001:db8::1", "documentation"),
    ("2001::1", "reserved"),  # Teredo
    ("::ffff:127.0.0.1", "IPv4-mapped loopback"),
    ("::ffff:169.254.169.254", "IPv4-mapped link-local"),
    ("::ffff:10.0.0.1", "IPv4-mapped private"),
    ("64:ff9b::a00:5", "IPv6-embedded private"),  # NAT64 of 10.0.0.5
    ("2002:7f00:1::", "IPv6-embedded loopback"),  # 6to4 of 127.0.0.1
    ("::127.0.0.1", "reserved"),  # the deprecated IPv4-compatible form
]
PUBLIC = ["1.1.1.1", "8.8.8.8", "140.82.112.3", "100.63.255.255", "100.128.0.1", "172.32.0.1",
          "2606:4700:4700::1111", "::ffff:1.1.1.1", "64:ff9b::101:101"]  # fmt: skip


@pytest.mark.parametrize(("address", "kind"), INWARD)
def test_inward_addresses_are_classified_and_refused(address: str, kind: str) -> None:
    ip = ipaddress.ip_address(address)
    assert classify(ip) == kind
    with pytest.raises(OutboundRefused) as refused:
        OutboundPolicy().check_address(ip)
    assert kind in str(refused.value) and "OUTBOUND_ALLOW_NETWORKS" in str(refused.value)


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed(address: str) -> None:
    ip = ipaddress.ip_address(address)
    assert classify(ip) is None
    OutboundPolicy().check_address(ip)
    assert OutboundPolicy().allowed(ip)


def test_the_operator_allows_networks_and_nothing_around_them() -> None:
    policy = OutboundPolicy.from_entries([" 10.20.0.0/16 ", "127.0.0.1", "fd00::/8", ""])
    assert policy.allow_networks == parse_networks(["10.20.0.0/16", "127.0.0.1/32", "fd00::/8"])
    assert policy.allowed(ipaddress.ip_address("10.20.3.4"))
    assert policy.allowed(ipaddress.ip_address("127.0.0.1"))
    assert policy.allowed(ipaddress.ip_address("::ffff:127.0.0.1"))  # the same host, mapped
    assert policy.allowed(ipaddress.ip_address("fd00::5"))
    for outside in ["10.21.0.1", "127.0.0.2", "169.254.169.254", "fc00::1", "::1"]:
        assert not policy.allowed(ipaddress.ip_address(outside)), outside
    # A host bit set is the network it sits in (an operator writing 10.20.1.1/16 means that).
    assert parse_networks(["10.20.1.1/16"]) == (ipaddress.ip_network("10.20.0.0/16"),)


@pytest.mark.parametrize(
    ("address", "inner"),
    [
        ("64:ff9b::a00:5", "10.0.0.5"),  # NAT64: the low 32 bits, exactly
        ("64:ff9b::c0a8:101", "192.168.1.1"),
        ("64:ff9b::101:101", "1.1.1.1"),
        ("::ffff:10.0.0.1", "10.0.0.1"),  # IPv4-mapped
        ("2002:7f00:1::", "127.0.0.1"),  # 6to4
    ],
)
def test_the_ipv4_address_an_ipv6_address_reaches_is_read_exactly(address: str, inner: str) -> None:
    assert embedded_ipv4(ipaddress.ip_address(address)) == ipaddress.ip_address(inner)
    assert embedded_ipv4(ipaddress.ip_address(inner)) is None
    assert embedded_ipv4(ipaddress.ip_address("2606:4700:4700::1111")) is None


def test_blank_allowed_entries_are_skipped_wherever_they_are() -> None:
    assert parse_networks(["10.0.0.0/8", "  ", "", "fd00::/8"]) == (
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("fd00::/8"),
    )


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "internal.example", "10.0.0.0/8;", "fd00::/129"])
def test_a_bad_allowed_network_is_an_error_naming_it(entry: str) -> None:
    with pytest.raises(ValueError, match="OUTBOUND_ALLOW_NETWORKS") as bad:
        parse_networks(["10.0.0.0/8", entry])
    assert repr(entry) in str(bad.value)


def test_a_name_is_resolved_once_and_one_inward_answer_refuses_it() -> None:
    calls: list[tuple[str, int]] = []

    def resolver(host: str, port: int) -> list[str]:
        calls.append((host, port))
        return ["1.1.1.1", "10.0.0.5", "1.1.1.1"]

    with pytest.raises(OutboundRefused) as refused:
        OutboundPolicy(resolver=resolver).resolve("gateway.example", 443)
    assert str(refused.value) == (
        "gateway.example resolves to 10.0.0.5, a private address; "
        "an operator can allow it with OUTBOUND_ALLOW_NETWORKS"
    )
    assert calls == [("gateway.example", 443)]
    allowed = OutboundPolicy.from_entries(["10.0.0.0/8"], resolver=resolver)
    assert allowed.resolve("gateway.example", 443) == [
        ipaddress.ip_address("1.1.1.1"),
        ipaddress.ip_address("10.0.0.5"),
    ]


def test_literal_addresses_and_local_names_are_checked_without_a_resolver() -> None:
    def resolver(host: str, port: int) -> list[str]:
        raise AssertionError(f"a literal address was sent to the resolver: {host}")

    policy = OutboundPolicy(resolver=resolver)
    for literal in ["127.0.0.1", "[::1]", "[::ffff:127.0.0.1]", "169.254.169.254", "[fe80::1%eth0]"]:
        with pytest.raises(OutboundRefused):
            policy.resolve(literal, 80)
    assert policy.resolve("1.1.1.1", 443) == [ipaddress.ip_address("1.1.1.1")]
    # Names go through the real resolver and are judged by what they resolve to.
    with pytest.raises(OutboundRefused, match="localhost resolves to 127.0.0.1, a loopback address"):
        OutboundPolicy().resolve("localhost", 80)


def test_the_save_time_check_passes_names_that_do_not_resolve_now() -> None:
    def nowhere(host: str, port: int) -> list[str]:
        raise OSError("no such name")

    OutboundPolicy(resolver=nowhere).check_url("https://mcp.example.invalid/mcp")  # decided at connect
    with pytest.raises(OutboundRefused, match="169.254.169.254 is a link-local address"):
        OutboundPolicy(resolver=nowhere).check_url("http://169.254.169.254/latest/meta-data/")
    with pytest.raises(OutboundRefused, match="metadata.internal resolves to 169.254.169.254"):
        OutboundPolicy(resolver=lambda h, p: ["169.254.169.254"]).check_url("http://metadata.internal/")


# The special-purpose rows the policy refuses, written here from the IANA IPv4 and IPv6
# special-purpose registries (with the class each is reported as), narrower rows first.
REGISTRY_ROWS = [
    ("0.0.0.0/8", "unspecified"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared (CGNAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved"),
    ("192.0.2.0/24", "documentation"),
    ("192.88.99.0/24", "reserved"),  # the retired 6to4 relay anycast
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::/96", "reserved"),
    ("64:ff9b:1::/48", "private"),  # local-use NAT64
    ("100::/64", "reserved"),
    ("2001::/23", "reserved"),
    ("2001:db8::/32", "documentation"),
    ("fc00::/7", "private"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "private"),  # deprecated site-local
    ("ff00::/8", "multicast"),
]


def row_addresses() -> list[tuple[str, str, str]]:
    """(row, address, class) for every row above: the row's first, middle and last addresses that
    no earlier (narrower) row claims, so each row is reached through itself."""
    out = []
    for index, (cidr, kind) in enumerate(REGISTRY_ROWS):
        net = ipaddress.ip_network(cidr)
        earlier = [ipaddress.ip_network(c) for c, _ in REGISTRY_ROWS[:index]]
        for address in dict.fromkeys(
            [net[0], net[1 % net.num_addresses], net[net.num_addresses // 2], net[-1]]
        ):
            if not any(address.version == e.version and address in e for e in earlier):
                out.append((cidr, str(address), kind))
    return out


def test_every_registry_row_reaches_an_address_of_its_own() -> None:
    assert {row for row, _, _ in row_addresses()} == {row for row, _ in REGISTRY_ROWS}


@pytest.mark.parametrize(("row", "address", "kind"), row_addresses())
def test_an_address_from_every_row_is_refused_as_that_row(row: str, address: str, kind: str) -> None:
    ip = ipaddress.ip_address(address)
    assert classify(ip) == kind, row
    with pytest.raises(OutboundRefused) as refused:
        OutboundPolicy().check_address(ip)
    assert f"{kind} address" in str(refused.value)


@pytest.mark.parametrize(
    ("url", "port"),
    [
        ("http://mcp.example/mcp", 80),
        ("https://mcp.example/mcp", 443),
        ("http://mcp.example:8080/mcp", 8080),
        ("ftp://mcp.example/", 443),  # a scheme without a default of its own
        ("http://mcp.example:99999/", 80),  # a port out of range: the scheme's default
        ("https://mcp.example:99999/", 443),
        ("ftp://mcp.example:99999/", 443),
    ],
)
def test_the_save_time_check_resolves_the_url_s_port(url: str, port: int) -> None:
    asked: list[tuple[str, int]] = []
    OutboundPolicy(resolver=lambda host, p: asked.append((host, p)) or ["1.1.1.1"]).check_url(url)
    assert asked == [("mcp.example", port)]


def test_a_refusal_writes_a_mapped_address_as_people_do() -> None:
    mapped = ipaddress.ip_address("::ffff:127.0.0.1")
    with pytest.raises(
        OutboundRefused, match=r"^proxy.example resolves to ::ffff:127\.0\.0\.1, an IPv4-mapped"
    ):
        OutboundPolicy(resolver=lambda h, p: [str(mapped)]).resolve("proxy.example", 443)
    with pytest.raises(OutboundRefused, match=r"^proxy.example resolves to fe80::1, a link-local"):
        OutboundPolicy(resolver=lambda h, p: ["fe80::1"]).resolve("proxy.example", 443)


def test_a_policy_cannot_be_loosened_once_built() -> None:
    """One policy object is shared by every request of a process: nothing may widen it in place."""
    policy = OutboundPolicy.from_entries(["10.0.0.0/8"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.allow_networks = parse_networks(["0.0.0.0/0"])  # type: ignore[misc]
    assert not policy.allowed(ipaddress.ip_address("192.168.1.1"))
