"""The outbound policy: which addresses a request made on a user's behalf may connect to.

A user names a URL (an MCP server, a webhook, a reference document); the product must not become
their way into the operator's network. So every such request resolves its host once, refuses the
whole answer when any address points inward (loopback, private, link-local, shared/CGNAT,
multicast, reserved, unspecified, and IPv6 forms embedding such an IPv4 address), and then
connects to one of exactly the addresses it checked (``mcptax.outbound.transport``), never
resolving the name a second time: a second answer is how DNS rebinding gets past a check.

An operator can allow networks (``OUTBOUND_ALLOW_NETWORKS``, e.g. an internal MCP gateway); an
address inside one is allowed whatever its class.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from urllib.parse import urlsplit

IPAddress = IPv4Address | IPv6Address
IPNetwork = IPv4Network | IPv6Network
# (host, port) -> the addresses it resolves to, in the order to try them.
Resolver = Callable[[str, int], Sequence[str]]

SETTING = "OUTBOUND_ALLOW_NETWORKS"
DEFAULT_PORTS = {"http": 80, "https": 443}

# Checked in order, the narrower entries first. Named after the IANA special-purpose registries;
# anything else that is not globally routable falls to "reserved" below.
_V4_CLASSES: tuple[tuple[IPv4Network, str], ...] = tuple(
    (IPv4Network(net), name)
    for net, name in (
        ("0.0.0.0/8", "unspecified"),  # "this network": connecting to 0.0.0.0 reaches this host
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared (CGNAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),  # cloud metadata services live at 169.254.169.254
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "reserved"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "reserved"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),  # and 255.255.255.255, the broadcast address
    )
)
_V6_CLASSES: tuple[tuple[IPv6Network, str], ...] = tuple(
    (IPv6Network(net), name)
    for net, name in (
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/96", "reserved"),  # the deprecated IPv4-compatible form
        ("64:ff9b:1::/48", "private"),  # local-use NAT64
        ("100::/64", "reserved"),  # discard-only
        ("2001::/23", "reserved"),  # IETF protocol assignments, Teredo (2001::/32) among them
        ("2001:db8::/32", "documentation"),
        ("fc00::/7", "private"),  # unique local
        ("fe80::/10", "link-local"),
        ("fec0::/10", "private"),  # the deprecated site-local range
        ("ff00::/8", "multicast"),
    )
)
_NAT64 = IPv6Network("64:ff9b::/96")


class OutboundRefused(Exception):
    """The policy refuses to connect. The message names the host, the address and its class."""

    def __init__(self, host: str, address: IPAddress, kind: str) -> None:
        article = "an" if kind[0] in "aeiouIU" else "a"
        what = f"{article} {kind} address; an operator can allow it with {SETTING}"
        if literal_address(host) == address:
            message = f"{show(address)} is {what}"
        else:
            message = f"{host} resolves to {show(address)}, {what}"
        super().__init__(message)
        self.host = host
        self.address = address
        self.kind = kind


def show(address: IPAddress) -> str:
    """An address as people write it (``::ffff:127.0.0.1``, not ``::ffff:7f00:1``)."""
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        return f"::ffff:{address.ipv4_mapped}"
    return str(address)


def embedded_ipv4(address: IPAddress) -> IPv4Address | None:
    """The IPv4 address an IPv6 address carries and reaches (IPv4-mapped, NAT64, 6to4), if any."""
    if isinstance(address, IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def classify(address: IPAddress) -> str | None:
    """Why ``address`` points inward ("loopback", "private", ...), or None for a public address."""
    inner = embedded_ipv4(address)
    if inner is not None:
        kind = classify(inner)
        if kind is None:
            return None
        mapped = isinstance(address, IPv6Address) and address.ipv4_mapped is not None
        form = "IPv4-mapped" if mapped else "IPv6-embedded"
        return f"{form} {kind}"
    table: Iterable[tuple[IPNetwork, str]] = _V4_CLASSES if address.version == 4 else _V6_CLASSES
    for network, kind in table:
        if address in network:
            return kind
    # Whatever else the registries say is not globally reachable (new ranges included).
    return None if address.is_global else "reserved"


def parse_networks(entries: Iterable[str]) -> tuple[IPNetwork, ...]:
    """The operator's allowed networks (CIDR, or a single address); ValueError names a bad entry."""
    networks: list[IPNetwork] = []
    for entry in entries:
        text = entry.strip()
        if not text:
            continue
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ValueError(
                f"{SETTING}: {text!r} is not a network (write e.g. 10.20.0.0/16, 127.0.0.1 or fd00::/8)"
            ) from None
    return tuple(networks)


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the operating system's resolver gives for ``host``, in its order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def literal_address(host: str) -> IPAddress | None:
    """``host`` as an IP address when it is written as one (brackets and IPv6 zones allowed)."""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


@dataclass(frozen=True)
class OutboundPolicy:
    """Where requests on a user's behalf may go. The default allows public addresses only."""

    allow_networks: tuple[IPNetwork, ...] = ()
    resolver: Resolver = system_resolver

    @classmethod
    def from_entries(cls, entries: Iterable[str], resolver: Resolver = system_resolver) -> OutboundPolicy:
        return cls(parse_networks(entries), resolver)

    def operator_allowed(self, address: IPAddress) -> bool:
        """Inside a network the operator allows, directly or through the IPv4 address it embeds."""
        candidates = [address, *filter(None, [embedded_ipv4(address)])]
        return any(a in network for a in candidates for network in self.allow_networks)

    def allowed(self, address: IPAddress) -> bool:
        """Public, or inside a network the operator allows."""
        return classify(address) is None or self.operator_allowed(address)

    def check_address(self, address: IPAddress, host: str = "") -> None:
        """Raise OutboundRefused when ``address`` may not be reached."""
        if not self.allowed(address):
            raise OutboundRefused(host or str(address), address, classify(address) or "reserved")

    def resolve(self, host: str, port: int) -> list[IPAddress]:
        """Resolve ``host`` once and check every answer; the caller connects to these, no others.

        Raises OutboundRefused when any answer points inward (one inward answer is enough to
        refuse the name: which answer a later connection would use is not ours to choose), and
        OSError when the name does not resolve.
        """
        literal = literal_address(host)
        if literal is not None:
            self.check_address(literal, host.strip("[]"))
            return [literal]
        addresses: list[IPAddress] = []
        for answer in self.resolver(host, port):
            address = literal_address(answer)
            if address is None:
                raise OSError(f"the resolver answered {answer!r} for {host}, not an address")
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise OSError(f"{host} has no address")
        for address in addresses:
            self.check_address(address, host)
        return addresses

    def check_url(self, url: str) -> None:
        """The check at save time: raise OutboundRefused when the URL's host resolves inward.

        A host that does not resolve now passes: whether it can be reached is decided when the
        request is made, by the same policy.
        """
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        if not host:
            return
        try:
            port = parts.port or DEFAULT_PORTS.get(parts.scheme, 443)
        except ValueError:
            port = DEFAULT_PORTS.get(parts.scheme, 443)
        try:
            self.resolve(host, port)
        except OSError:
            return
