"""The SDK-free fast path of `mcp-tax measure` (mcptax.client.legacy) against the SDK's client, on
the same real servers: the messages each sends (recorded by a pass-through between client and
server), and what each returns. The SDK is the reference throughout."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp_types import version as sdk_versions

from examples.servers.launch import stdio_command
from mcptax.client import PollError, ServerTarget, legacy
from mcptax.client.spawn import start_server
from tests.mcptax.client.support import assert_dead, fetch

RECORDER = Path(__file__).resolve().parents[2] / "servers" / "record_stdio.py"
pytestmark = pytest.mark.timeout(120)

SERVERS = {
    # Servers of the modern era (the SDK's own server answers server/discover) ...
    "lean": ("lean",),
    "paged": ("sprawling", "--page-size", "3"),
    # ... and of the handshake era, with key order and extra keys a re-serialising client loses.
    "handshake-era": ("misbehaving", "--mode", "quirky"),
}


def recorded(log: Path, server: str, *args: str) -> ServerTarget:
    command, argv, env = stdio_command(server, *args)
    return ServerTarget(
        "stdio", command=sys.executable, args=[str(RECORDER), str(log), "--", command, *argv], env=env
    )


def target_of(server: str, *args: str) -> ServerTarget:
    command, argv, env = stdio_command(server, *args)
    return ServerTarget("stdio", command=command, args=argv, env=env)


def fast(target: ServerTarget, *, timeout: float = 60.0, max_bytes: int = 2_000_000) -> Any:
    async def run() -> Any:
        process = await start_server(target, target.env)
        try:
            return await legacy.fetch_handshake_era(
                process, timeout=timeout, max_bytes=max_bytes
            ), process.pid
        except PollError as exc:
            return exc, process.pid

    return anyio.run(run)


def client_lines(log: Path) -> list[dict[str, Any]]:
    return [
        entry["message"]
        for entry in map(json.loads, log.read_text().splitlines())
        if entry["from"] == "client"
    ]


@pytest.mark.parametrize("name", list(SERVERS))
def test_the_fast_path_sends_what_the_sdk_sends_and_returns_what_it_returns(name, tmp_path):
    sdk_log, fast_log = tmp_path / "sdk.jsonl", tmp_path / "fast.jsonl"
    reference = fetch(recorded(sdk_log, *SERVERS[name]), include_prompts_resources=False)
    result, pid = fast(recorded(fast_log, *SERVERS[name]))

    assert result is not None, "a plain server stays on the fast path"
    assert client_lines(fast_log) == client_lines(sdk_log)
    methods = [message.get("method") for message in client_lines(fast_log)]
    assert methods[0] == "server/discover" and methods.count("tools/list") == reference.pages
    assert result.raw_pages == reference.raw_pages
    assert result.tools == reference.tools
    assert json.dumps(result.tools) == json.dumps(reference.tools), "key order kept"
    assert result.handshake == reference.handshake
    for field in (
        "server_name",
        "server_version",
        "server_title",
        "protocol_version",
        "instructions",
        "pages",
        "payload_bytes",
    ):
        assert getattr(result, field) == getattr(reference, field), field
    assert_dead(pid)


def test_both_eras_are_covered_by_the_servers_above():
    eras = {name: fast(target_of(*args))[0].protocol_version for name, args in SERVERS.items()}
    assert eras["lean"] in sdk_versions.MODERN_PROTOCOL_VERSIONS
    assert eras["handshake-era"] in sdk_versions.HANDSHAKE_PROTOCOL_VERSIONS


def test_the_versions_and_client_it_names_are_the_sdks():
    assert legacy.PROBE_VERSION == sdk_versions.LATEST_MODERN_VERSION
    assert legacy.MODERN_VERSIONS == sdk_versions.MODERN_PROTOCOL_VERSIONS
    assert legacy.HANDSHAKE_VERSION == sdk_versions.LATEST_HANDSHAKE_VERSION
    assert legacy.HANDSHAKE_VERSIONS == sdk_versions.HANDSHAKE_PROTOCOL_VERSIONS
    assert legacy.UNSUPPORTED_PROTOCOL_VERSION == mcp_types.UNSUPPORTED_PROTOCOL_VERSION


# Tools of shapes the SDK's models may refuse: the fast path must never accept one the SDK refuses.
TOOL_SHAPES: list[dict[str, Any]] = [
    {"name": "plain", "inputSchema": {"type": "object"}},
    {"name": "extra", "inputSchema": {"type": "object"}, "x-vendor": [1, 2]},
    {"name": "hints", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True, "title": "T"}},
    {"name": 7, "inputSchema": {"type": "object"}},
    {"name": "no-schema"},
    {"name": "array-schema", "inputSchema": {"type": "array"}},
    {"name": "null-title", "title": None, "inputSchema": {"type": "object"}},
    {"name": "number-description", "description": 3, "inputSchema": {"type": "object"}},
    {"name": "string-hint", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": "yes"}},
    {"name": "icon-without-src", "inputSchema": {"type": "object"}, "icons": [{"mimeType": "image/png"}]},
    {"name": "output", "inputSchema": {"type": "object"}, "outputSchema": {"type": "string"}},
]


# The shapes plain enough for the fast path, named by hand: every other one goes to the SDK.
FAST_PATH_SHAPES = ["plain", "extra", "hints"]


@pytest.mark.parametrize(
    "tool", [t for t in TOOL_SHAPES if t["name"] in FAST_PATH_SHAPES], ids=lambda tool: str(tool["name"])
)
def test_a_tool_the_fast_path_accepts_is_one_the_sdk_accepts(tool):
    assert legacy._tool_is_plain(tool)
    parsed = mcp_types.ListToolsResult.model_validate({"tools": [tool]})
    assert parsed.tools[0].name == tool["name"]


@pytest.mark.parametrize(
    "tool", [t for t in TOOL_SHAPES if t["name"] not in FAST_PATH_SHAPES], ids=lambda tool: str(tool["name"])
)
def test_a_tool_of_any_other_shape_is_handed_to_the_sdk(tool):
    assert not legacy._tool_is_plain(tool)


def test_the_table_above_has_shapes_on_both_sides():
    accepted = [tool["name"] for tool in TOOL_SHAPES if legacy._tool_is_plain(tool)]
    assert accepted == FAST_PATH_SHAPES


def test_a_line_that_is_not_json_hands_the_server_back_stopped(tmp_path):
    result, pid = fast(target_of("misbehaving", "--mode", "invalid_json"))
    assert result is None
    assert_dead(pid)


def test_an_oversize_answer_is_refused_with_the_sdk_paths_outcome():
    args = ("misbehaving", "--mode", "huge", "--huge-mb", "1")
    with pytest.raises(PollError) as sdk:
        fetch(target_of(*args), max_bytes=100_000, include_prompts_resources=False)
    result, pid = fast(target_of(*args), max_bytes=100_000)
    assert isinstance(result, PollError)
    assert result.outcome == sdk.value.outcome == "refused_too_large"
    assert "100000 bytes" in result.message
    assert_dead(pid)


def test_a_server_that_never_answers_is_a_timeout_naming_the_probe():
    result, pid = fast(target_of("misbehaving", "--mode", "hang"), timeout=1.0)
    assert isinstance(result, PollError) and result.outcome == "timeout"
    assert "server/discover" in result.message and "1 s" in result.message
    assert_dead(pid)
