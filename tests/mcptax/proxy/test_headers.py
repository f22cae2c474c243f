"""Which headers the HTTP proxy forwards (mcptax.proxy.http): hop-by-hop ones belong to one
connection (RFC 9110 §7.6.1) and must stop at the proxy in both directions."""

from __future__ import annotations

from mcptax.proxy.http import _forward_request_headers, _relayed_response_headers

# Written out here from the RFC, not imported from the module under test.
CONNECTION_HEADERS = [
    (b"Connection", b"keep-alive"),
    (b"Keep-Alive", b"timeout=5"),
    (b"Proxy-Authenticate", b"Basic"),
    (b"Proxy-Authorization", b"Basic eA=="),
    (b"Proxy-Connection", b"keep-alive"),
    (b"TE", b"trailers"),
    (b"Trailer", b"Expires"),
    (b"Transfer-Encoding", b"chunked"),
    (b"Upgrade", b"websocket"),
]
END_TO_END = [(b"Mcp-Session-Id", b"s1"), (b"Content-Type", b"application/json"), (b"X-Upstream", b"yes")]


def test_request_keeps_end_to_end_headers_and_drops_connection_ones() -> None:
    scope = {"headers": [*CONNECTION_HEADERS, (b"host", b"proxy:1"), *END_TO_END]}
    assert _forward_request_headers(scope) == [*END_TO_END, (b"accept-encoding", b"identity")]


def test_response_keeps_end_to_end_headers_and_drops_connection_ones() -> None:
    assert _relayed_response_headers([*END_TO_END[:1], *CONNECTION_HEADERS, *END_TO_END[1:]]) == END_TO_END
