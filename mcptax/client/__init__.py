"""The poller's MCP client: fetch a server's complete ``tools/list``, exactly as the server sent it.

Everything protocol-level goes through the official SDK (``mcp.Client``: version negotiation with
the ``server/discover`` probe and ``initialize`` fallback, JSON-RPC dispatch, pagination calls).
Two things are added around it, both through the SDK's public ``Transport`` seam:

- a tap on the transport's streams (:mod:`.tap`) records the raw JSON-RPC ``result`` of every
  ``tools/list`` answer, because the snapshot identity is the sha256 of exactly what the server
  sent (key order, unknown keys and all);
- byte limits, so an unbounded or hostile server cannot exhaust the worker's memory: the stdio
  transport is our own (:mod:`.stdio`), bounded per message, and HTTP responses are read through a
  byte-counting httpx transport (:mod:`.http`).

Failures are mapped to one poll outcome (:mod:`.errors`); :mod:`.fetch` is the entry point.
One exception to "through the SDK": :mod:`.legacy`, the fast path of the one-shot ``mcp-tax
measure``, speaks the SDK's own messages to a stdio server itself and hands every server that
leaves that path back to the SDK.
This package must not import Django.

The SDK is imported on first use of a name from :mod:`.fetch` (about 0.7 s of start-up): the
target, result and error types below need none of it, so a process that only names them (the
dashboard's web pages, ``mcp-tax tokens``) never pays for it.
"""

from typing import TYPE_CHECKING, Any

from mcptax.client.target import (
    ENVELOPE_SLACK_BYTES,
    MAX_PAGES,
    OUTCOMES,
    FetchResult,
    Outcome,
    PollError,
    ServerTarget,
    TransportKind,
    canonical_bytes,
)

if TYPE_CHECKING:
    from mcptax.client.fetch import fetch_tools, fetch_tools_sync

_FROM_FETCH = ("fetch_tools", "fetch_tools_sync")


def __getattr__(name: str) -> Any:
    if name in _FROM_FETCH:
        from mcptax.client import fetch

        return getattr(fetch, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ENVELOPE_SLACK_BYTES",
    "MAX_PAGES",
    "OUTCOMES",
    "FetchResult",
    "Outcome",
    "PollError",
    "ServerTarget",
    "TransportKind",
    "canonical_bytes",
    "fetch_tools",
    "fetch_tools_sync",
]
