"""mcptax.client against real example servers (stdio subprocesses and loopback HTTP)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from examples.servers.launch import free_port, serve_http, stdio_command
from examples.servers.misbehaving import QUIRKY_PAGES
from mcptax.client import (
    ENVELOPE_SLACK_BYTES,
    FetchResult,
    PollError,
    ServerTarget,
    canonical_bytes,
    fetch_tools,
    fetch_tools_sync,
)

pytestmark = pytest.mark.timeout(120)

CONNECT_TIMEOUT = 2.0
TOTAL_TIMEOUT = 4.0
# Stopping a stuck stdio server: stdin grace, SIGTERM grace, SIGKILL; plus interpreter noise.
STOP_ALLOWANCE = 3.5
MAX_BYTES = 2_000_000


def stdio_target(server: str, *args: str, env: dict[str, str] | None = None) -> ServerTarget:
    command, argv, child_env = stdio_command(server, *args, env=env)
    return ServerTarget("stdio", command=command, args=argv, env=child_env)


def fetch(target: ServerTarget, **overrides: float | int | bool) -> FetchResult:
    options: dict = {
        "connect_timeout": CONNECT_TIMEOUT * 4,
        "total_timeout": TOTAL_TIMEOUT * 4,
        "max_bytes": MAX_BYTES,
        **overrides,
    }
    return fetch_tools_sync(target, **options)


def process_state(pid: int) -> str:
    """'gone' once reaped, else the /proc state letter ('Z' for a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def is_dead(pid: int, within: float = 3.0) -> bool:
    """Whether ``pid`` is reaped or a zombie, allowing a killed process a moment to be scheduled out."""
    deadline = time.monotonic() + within
    while process_state(pid) not in ("gone", "Z"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture(scope="module")
def paged_sprawl_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("paged")
    with serve_http("sprawling", "--page-size", "4", "--root", str(root)) as url:
        yield url


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
    assert result.payload_bytes == len(canonical_bytes(result.raw_pages[0]))
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
    assert (
        hashlib.sha256(canonical_bytes(result.tools)).hexdigest()
        == hashlib.sha256(canonical_bytes(expected_tools)).hexdigest()
    )
    assert result.pages == 2
    assert result.payload_bytes == sum(len(canonical_bytes(page)) for page in QUIRKY_PAGES)
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
    assert paged.payload_bytes == sum(len(canonical_bytes(page)) for page in paged.raw_pages)


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


# -- faults -----------------------------------------------------------------------------------

FAULTS = [
    ("stdio", "hang", "timeout"),
    ("stdio", "hang_tools", "timeout"),
    ("stdio", "exit_mid", "crashed"),
    ("stdio", "invalid_json", "protocol_error"),
    ("stdio", "huge", "refused_too_large"),
    ("http", "hang", "timeout"),
    ("http", "hang_tools", "timeout"),
    ("http", "exit_mid", "crashed"),
    ("http", "invalid_json", "protocol_error"),
    ("http", "huge", "refused_too_large"),
]


@pytest.mark.parametrize(("transport", "mode", "outcome"), FAULTS)
def test_misbehaving_server_maps_to_outcome_within_the_timeout(
    transport: str, mode: str, outcome: str
) -> None:
    def attempt(target: ServerTarget) -> tuple[PollError, float]:
        started = time.monotonic()
        with pytest.raises(PollError) as caught:
            fetch(target, connect_timeout=CONNECT_TIMEOUT, total_timeout=TOTAL_TIMEOUT)
        return caught.value, time.monotonic() - started

    if transport == "stdio":
        error, elapsed = attempt(stdio_target("misbehaving", "--mode", mode))
    else:
        with serve_http("misbehaving", "--mode", mode) as url:
            error, elapsed = attempt(ServerTarget("http", url=url))

    assert error.outcome == outcome, error.message
    if outcome == "timeout":
        budget = CONNECT_TIMEOUT if mode == "hang" else TOTAL_TIMEOUT
        assert budget - 0.2 <= elapsed <= budget + STOP_ALLOWANCE
        assert ("server/discover" if mode == "hang" else "tools/list") in error.message
    else:
        # Faults other than silence are noticed at once, not when the timeout runs out.
        assert elapsed < CONNECT_TIMEOUT
    if outcome == "refused_too_large":
        assert str(MAX_BYTES) in error.message


def test_huge_answer_is_refused_after_reading_only_about_the_limit() -> None:
    # 24 MB on offer, 64 KiB limit: the refusal must come long before 24 MB could be read.
    started = time.monotonic()
    with pytest.raises(PollError) as caught:
        fetch(stdio_target("misbehaving", "--mode", "huge", "--huge-mb", "24"), max_bytes=64 * 1024)
    assert caught.value.outcome == "refused_too_large"
    assert f"{64 * 1024 + ENVELOPE_SLACK_BYTES} bytes" in caught.value.message
    assert time.monotonic() - started < CONNECT_TIMEOUT


def test_stuck_stdio_server_and_its_helper_are_killed_and_reaped(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    target = stdio_target(
        "misbehaving", "--mode", "hang", "--spawn-child", "--ignore-sigterm", "--pid-file", str(pid_file)
    )
    with pytest.raises(PollError) as caught:
        fetch(target, connect_timeout=1.0, total_timeout=2.0)
    assert caught.value.outcome == "timeout"
    server_pid, helper_pid = (int(line) for line in pid_file.read_text().split())
    assert process_state(server_pid) == "gone", "the server must be reaped, not left a zombie"
    # The helper was reparented when the server died; whoever reaps orphans here may be slow,
    # but it must not be running.
    assert is_dead(helper_pid)


def test_helper_left_by_a_server_that_exits_politely_is_killed(tmp_path: Path) -> None:
    # quirky answers correctly and exits when its stdin closes, but leaves its helper behind.
    pid_file = tmp_path / "pids"
    result = fetch(
        stdio_target("misbehaving", "--mode", "quirky", "--spawn-child", "--pid-file", str(pid_file))
    )
    assert result.pages == 2
    server_pid, helper_pid = (int(line) for line in pid_file.read_text().split())
    assert process_state(server_pid) == "gone"
    assert is_dead(helper_pid)


def test_stdio_server_is_reaped_when_the_caller_cancels(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    target = stdio_target("misbehaving", "--mode", "hang", "--ignore-sigterm", "--pid-file", str(pid_file))

    async def main() -> float:
        started = anyio.current_time()
        with anyio.move_on_after(1.5) as scope:
            await fetch_tools(target, connect_timeout=30, total_timeout=60, max_bytes=MAX_BYTES)
        assert scope.cancelled_caught
        return anyio.current_time() - started

    elapsed = anyio.run(main)
    assert elapsed < 1.5 + STOP_ALLOWANCE
    assert process_state(int(pid_file.read_text().split()[0])) == "gone"


def test_unreachable_servers_are_connect_errors() -> None:
    with pytest.raises(PollError) as missing:
        fetch(ServerTarget("stdio", command="/nonexistent/mcp-server"))
    assert missing.value.outcome == "connect_error"
    with pytest.raises(PollError) as refused:
        fetch(ServerTarget("http", url=f"http://127.0.0.1:{free_port()}/mcp"))
    assert refused.value.outcome == "connect_error"


def test_server_that_exits_at_once_is_a_crash() -> None:
    started = time.monotonic()
    with pytest.raises(PollError) as caught:
        fetch(ServerTarget("stdio", command="/bin/sh", args=["-c", "echo starting up >&2; exit 7"]))
    assert caught.value.outcome == "crashed"
    assert "code 7" in caught.value.message and "starting up" in caught.value.message
    assert time.monotonic() - started < CONNECT_TIMEOUT


# -- API details ------------------------------------------------------------------------------


def test_fetch_tools_sync_works_inside_a_running_event_loop(tmp_path: Path) -> None:
    target = stdio_target("lean", "--root", str(tmp_path))

    async def main() -> FetchResult:
        return fetch_tools_sync(target, connect_timeout=10, total_timeout=20, max_bytes=MAX_BYTES)

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


def test_child_environment_is_passed(tmp_path: Path) -> None:
    # The target's env reaches the server (here: the root it writes under).
    out = tmp_path / "root"
    result = fetch(stdio_target("lean", env={"MCP_EXAMPLE_ROOT": str(out)}))
    assert result.server_name == "files-lean"
    assert out.is_dir()
    assert json.loads(json.dumps(result.tools)) == result.tools
    assert os.environ.get("MCP_EXAMPLE_ROOT") is None
