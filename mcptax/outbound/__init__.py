"""One outbound policy for every request the product makes on a user's behalf: HTTP MCP servers,
channels (webhook, Slack, Apprise) and reference documents. :mod:`.policy` decides (classify an
address, the operator's allowed networks, resolve once); :mod:`.transport` gives httpx transports
that connect only to the addresses the policy checked. This package must not import Django.
"""

from typing import TYPE_CHECKING, Any

from mcptax.outbound.policy import (
    SETTING,
    OutboundPolicy,
    OutboundRefused,
    classify,
    embedded_ipv4,
    parse_networks,
    system_resolver,
)

if TYPE_CHECKING:
    from mcptax.outbound.transport import AsyncPinnedTransport, PinnedTransport


def __getattr__(name: str) -> Any:
    # The transports need httpx; the settings, which only parse networks, do not.
    if name in ("AsyncPinnedTransport", "PinnedTransport"):
        from mcptax.outbound import transport

        return getattr(transport, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SETTING",
    "AsyncPinnedTransport",
    "OutboundPolicy",
    "OutboundRefused",
    "PinnedTransport",
    "classify",
    "embedded_ipv4",
    "parse_networks",
    "system_resolver",
]
