"""Shared line reading and agent naming (mcptax/formats/records.py)."""

from __future__ import annotations

import json

from mcptax.formats import normalize_agent_family, parse, read_calls
from tests.mcptax.formats.helpers import CALL, RESULT, env_line, outcomes_of


def test_oversize_line_is_quarantined_whole() -> None:
    big = env_line(1, "c2s", {**CALL, "params": {"name": "t", "arguments": {"text": "x" * 5000}}})
    items = list(read_calls([big, env_line(2, "s2c", RESULT)], "envelope", max_line_bytes=4096))
    first = outcomes_of(items)[1]
    assert (first.status, first.reason) == ("quarantined", "oversize_line")
    assert first.raw == big.rstrip(b"\n")  # never truncated
    assert outcomes_of(items)[2].reason == "orphan_response"


def test_line_events_carry_byte_offsets_and_accept_crlf() -> None:
    data = (
        env_line(1, "c2s", CALL).replace(b"\n", b"\r\n")
        + b"garbage\r\n"
        + env_line(2, "s2c", RESULT).rstrip(b"\n")
    )
    events = list(parse(data.splitlines(keepends=True), "envelope"))
    assert [e.status for e in events] == ["frame", "quarantined", "frame"]
    for event in events:
        piece = data[event.offset : event.offset + event.length]
        if event.status == "frame":
            assert json.loads(piece)["raw"] == event.frames[0].message
        else:
            assert piece == b"garbage\r\n"
    assert events[1].raw == b"garbage"
    assert sum(e.length for e in events) == len(data)


def test_agent_family_normalization() -> None:
    assert normalize_agent_family("claude-code") == "claude-code"
    assert normalize_agent_family("codex-mcp-client", "Codex") == "codex"
    assert normalize_agent_family("gemini-cli-mcp-client") == "gemini-cli"
    assert normalize_agent_family("cursor-vscode") == "cursor"
    assert normalize_agent_family("Visual Studio Code") == "vscode"
    assert normalize_agent_family("My Agent 2") == "my-agent-2"
    assert normalize_agent_family(None) == "unknown"
