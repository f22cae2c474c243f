"""The fast path's connections: one serves every request of a poll and the polls after it (a
response is read to its end, so its connection goes back to the pool), a server that keeps its
event streams open costs one short wait and never a hang, and a result read from text without a
float says so (its identity is then hashed without the plainness check, to the same sha256)."""

from __future__ import annotations

from typing import Any

import httpcore
import pytest

from examples.servers.launch import serve_http
from mcptax import tokens
from mcptax.client import ServerTarget, fasthttp
from mcptax.outbound import transport
from tests.mcptax.client.support import LOOPBACK, MAX_BYTES, NEVER

pytestmark = pytest.mark.timeout(180)


def fetch(url: str, **overrides: Any) -> Any:
    result = fasthttp.fetch(
        ServerTarget("http", url=url), **{**NEVER, "max_bytes": MAX_BYTES, "outbound": LOOPBACK, **overrides}
    )
    assert result is not None, "the server left the fast path"
    return result


@pytest.fixture
def opened(monkeypatch) -> list[tuple[str, int]]:
    """Every connection the outbound backend opens, as (host, port)."""
    seen: list[tuple[str, int]] = []
    original = transport.PinnedBackend.connect_tcp

    def connect_tcp(self, host, port, *args, **kwargs):
        seen.append((host, port))
        return original(self, host, port, *args, **kwargs)

    monkeypatch.setattr(transport.PinnedBackend, "connect_tcp", connect_tcp)
    return seen


@pytest.fixture
def cut_short(monkeypatch) -> list[float]:
    """Every read of a response's rest that the grace cut short (its grace, in seconds)."""
    cuts: list[float] = []
    original = transport.GraceStream.read

    def read(self, max_bytes, timeout=None):
        try:
            return original(self, max_bytes, timeout)
        except httpcore.ReadTimeout:
            if self.grace is not None:
                cuts.append(self.grace)
            raise

    monkeypatch.setattr(transport.GraceStream, "read", read)
    return cuts


@pytest.mark.parametrize(
    ("server", "mode"),
    [
        (("lean",), "legacy"),  # event-stream answers, a 202 for the notification, a DELETE
        (("lean",), "auto"),  # JSON answers in the modern era
        (("sprawling", "--page-size", "3"), "auto"),  # four pages
    ],
)
def test_one_connection_serves_a_whole_poll_and_the_next(server, mode, opened, cut_short):
    with serve_http(*server) as url:
        first = fetch(url, mode=mode)
        second = fetch(url, mode=mode)
    assert first.tools and second.tools == first.tools
    assert len(opened) == 1, opened
    assert cut_short == []


def test_a_server_that_keeps_its_streams_open_costs_one_short_wait(opened, cut_short):
    with serve_http("misbehaving", "--mode", "open_stream") as url:
        result = fetch(url)
        again = fetch(url)
    # The answers are read as ever (two pages, handshake era) ...
    assert result.pages == 2 and result.protocol_version.startswith("2025-")
    assert again.tools == result.tools
    # ... each exchange waited for a stream's end once, briefly, then stopped waiting: no read ever
    # waited out the poll's own timeout, and each request had a connection of its own (the probe,
    # initialize, the notification and two pages, in each poll).
    assert cut_short == [fasthttp.REST_GRACE_SECONDS] * 2
    assert len(opened) == 2 * 5


@pytest.mark.parametrize(
    ("server", "float_free"),
    [
        (("lean",), True),
        (("sprawling", "--page-size", "3"), True),
        (("misbehaving", "--mode", "quirky"), False),  # "weight": 1.5 in an extension key
    ],
)
def test_a_result_read_without_floats_hashes_to_the_same_identity(server, float_free):
    with serve_http(*server) as url:
        result = fetch(url)
    assert result.float_free_json is float_free
    checked = tokens.snapshot_sha256(result.tools)
    assert tokens.snapshot_sha256(result.tools, float_free_json=result.float_free_json) == checked


def test_each_origin_has_its_own_pool_and_the_least_recent_is_closed(monkeypatch):
    monkeypatch.setattr(fasthttp, "POOLS_PER_THREAD", 3)
    fasthttp.close_pools()  # this thread starts with none
    a = fasthttp._pool(LOOPBACK, "http://127.0.0.1:9001/mcp")
    assert fasthttp._pool(LOOPBACK, "HTTP://127.0.0.1:9001/other?n=2") is a  # one origin, one pool
    b = fasthttp._pool(LOOPBACK, "http://127.0.0.1:9002/mcp")
    c = fasthttp._pool(LOOPBACK, "https://127.0.0.1:9001/mcp")
    assert len({id(a), id(b), id(c)}) == 3
    closed: list[object] = []
    monkeypatch.setattr(type(a), "close", lambda pool: closed.append(pool))
    fasthttp._pool(LOOPBACK, "http://127.0.0.1:9001/mcp")  # a used again: b is now the oldest
    d = fasthttp._pool(LOOPBACK, "http://127.0.0.1:9003/mcp")
    assert closed == [b]
    fasthttp.close_pools()  # a process about to fork its slots keeps none
    assert closed == [b, c, a, d]
    assert fasthttp._pool(LOOPBACK, "http://127.0.0.1:9001/mcp") is not a
