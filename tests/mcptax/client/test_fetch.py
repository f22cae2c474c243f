"""mcptax.client.fetch against real example servers (stdio subprocesses and loopback HTTP)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from examples.servers.launch import serve_http
from examples.servers.misbehaving import QUIRKY_PAGES
from mcptax.client import FetchResult, PollError, ServerTarget, fetch_tools_sync
from tests.helpers import CONNECT_BUDGET, compact, sha
from tests.mcptax.client.support import MAX_BYTES, compact_size, fetch, stdio_target

pytestmark = pytest.mark.timeout(120)


# -- successful fetches -----------------------------------------------------------------------


def test_fetch_over_stdio_returns_raw_tools_and_server_identity(tmp_path: Path) -> None:
    result = fetch(stdio_target("sprawling", "--root", str(tmp_path)))
    assert (result.server_name, result.server_version) == ("files-sprawl", "1.4.0")
    assert result.server_title == "Sprawling file server"
    assert result.protocol_version
    assert result.instructions and "specialised tools" in result.instructions
    assert len(result.tools) == 15 and result.pages == 1
    assert all(isinstance(tool, dict) for tool in result.tools)
    # Raw: the server's own keys are there, including those a pydantic dump would rename.
    assert all("inputSchema" in tool for tool in result.tools)
    assert result.tools == result.raw_pages[0]["tools"]
    assert result.payload_bytes == compact_size(result.raw_pages[0])
    assert result.handshake is not None
    # MCPServer advertises prompts and resources, and has none.
    assert (result.prompts_count, result.resources_count) == (0, 0)


def test_fetch_keeps_exactly_what_the_server_sent() -> None:
    result = fetch(stdio_target("misbehaving", "--mode", "quirky"))
    expected_tools = [tool for page in QUIRKY_PAGES for tool in page["tools"]]
    assert result.raw_pages == QUIRKY_PAGES
    assert result.tools == expected_tools
    # Equality of dicts ignores order; the snapshot identity does not.
    assert [list(tool) for tool in result.tools] == [list(tool) for tool in expected_tools]
    assert sha(compact(result.tools)) == sha(compact(expected_tools))
    assert result.pages == 2
    assert result.payload_bytes == sum(compact_size(page) for page in QUIRKY_PAGES)
    # A legacy server: the SDK probed server/discover, fell back to initialize.
    assert result.protocol_version == "2025-11-25"
    assert result.handshake == {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "misbehaving", "version": "0.0.1"},
    }
    # No prompts or resources capability: unknown, not zero.
    assert (result.prompts_count, result.resources_count) == (None, None)


def test_fetch_follows_next_cursor_over_http(paged_sprawl_url: str, tmp_path: Path) -> None:
    paged = fetch(ServerTarget("http", url=paged_sprawl_url))
    unpaged = fetch(stdio_target("sprawling", "--root", str(tmp_path)))
    assert paged.pages == 4
    assert [len(page["tools"]) for page in paged.raw_pages] == [4, 4, 4, 3]
    assert paged.raw_pages[0]["nextCursor"] == "offset-4"
    assert paged.tools == unpaged.tools
    assert paged.payload_bytes == sum(compact_size(page) for page in paged.raw_pages)


def test_fetch_over_legacy_sse(tmp_path: Path) -> None:
    with serve_http("lean", "--root", str(tmp_path), transport="sse") as url:
        result = fetch(ServerTarget("sse", url=url))
    assert (result.server_name, result.server_version) == ("files-lean", "2.0.0")
    assert [tool["name"] for tool in result.tools] == ["read", "write", "list", "search", "help"]


def test_headers_reach_the_http_server(tmp_path: Path) -> None:
    # A header that breaks the request proves headers are sent: a wrong Host is refused by the
    # SDK server's DNS-rebinding protection.
    with serve_http("lean", "--root", str(tmp_path)) as url:
        assert fetch(ServerTarget("http", url=url, headers={"X-Team": "a"})).server_name == "files-lean"
        with pytest.raises(PollError) as caught:
            fetch(ServerTarget("http", url=url, headers={"Host": "evil.example"}))
    assert caught.value.outcome in ("protocol_error", "connect_error")


def test_prompts_and_resources_can_be_skipped(tmp_path: Path) -> None:
    result = fetch(stdio_target("lean", "--root", str(tmp_path)), include_prompts_resources=False)
    assert (result.prompts_count, result.resources_count) == (None, None)
    assert len(result.tools) == 5


def test_grown_release_is_visible_to_the_poller(tmp_path: Path) -> None:
    before = fetch(stdio_target("lean", "--root", str(tmp_path)))
    after = fetch(stdio_target("lean", "--root", str(tmp_path), env={"MCP_EXAMPLE_GROWN": "1"}))
    assert (before.server_version, after.server_version) == ("2.0.0", "2.1.0")
    assert len(after.tools) > len(before.tools)
    assert after.payload_bytes > before.payload_bytes


# -- max_bytes --------------------------------------------------------------------------------


def test_max_bytes_is_exact_and_refuses_instead_of_truncating(paged_sprawl_url: str) -> None:
    target = ServerTarget("http", url=paged_sprawl_url)
    size = fetch(target).payload_bytes
    assert fetch(target, max_bytes=size).payload_bytes == size
    with pytest.raises(PollError) as caught:
        fetch(target, max_bytes=size - 1)
    assert caught.value.outcome == "refused_too_large"
    assert str(size) in caught.value.message and str(size - 1) in caught.value.message


# -- API details ------------------------------------------------------------------------------


def test_fetch_tools_sync_works_inside_a_running_event_loop(tmp_path: Path) -> None:
    target = stdio_target("lean", "--root", str(tmp_path))

    async def main() -> FetchResult:
        return fetch_tools_sync(
            target, connect_timeout=CONNECT_BUDGET, total_timeout=2 * CONNECT_BUDGET, max_bytes=MAX_BYTES
        )

    assert anyio.run(main).server_name == "files-lean"


def test_targets_and_errors_validate_their_fields() -> None:
    with pytest.raises(ValueError):
        ServerTarget("stdio")
    with pytest.raises(ValueError):
        ServerTarget("http")
    with pytest.raises(ValueError):
        ServerTarget("websocket", url="ws://x")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        PollError("exploded", "no such outcome")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        fetch(ServerTarget("stdio", command="true"), max_bytes=0)
