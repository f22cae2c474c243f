"""Tool discovery read from logs: Claude Code transcripts and stream-json, Anthropic API traffic
through the proxy (envelope) and as a HAR. Expected figures are worked out by hand from the
fixtures (tests/data/logs/README.md describes each one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcptax.discovery import Compaction, RequestTurn, ToolSearch, ToolUse, derive
from mcptax.formats import LineOutcome, ObservedCall, detect_format, read_calls
from mcptax.formats.records import Discovered
from tests.mcptax.formats.helpers import assert_reconciles

LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"
E, ADD, MUL, SAVE = "mcp__echo__echo", "mcp__calc__add", "mcp__calc__multiply", "mcp__notes__save"


def read(name: str) -> list:
    with open(LOGS / name, "rb") as f:
        fmt = detect_format(f.read(65536))
        f.seek(0)
        return list(read_calls(f, fmt))


def discovered(items: list) -> dict[str, list]:
    sessions: dict[str, list] = {}
    for item in items:
        if isinstance(item, Discovered):
            sessions.setdefault(item.session_key, []).extend(item.events)
    return sessions


def test_claude_code_transcript_searches_loads_calls_and_a_compaction() -> None:
    items = read("claude_code_tool_search.jsonl")
    assert_reconciles(items, 19)
    (events,) = discovered(items).values()
    searches = [e for e in events if isinstance(e, ToolSearch)]
    assert [(s.key, s.query, s.matches) for s in searches] == [
        ("toolu_s1", "select:" + E, (E,)),
        ("toolu_s2", "slack post message", ()),
        ("toolu_s3", "calculator add numbers", (ADD, MUL)),
        ("toolu_s4", "select:" + MUL, (MUL,)),
    ]
    assert {s.total_deferred for s in searches} == {117}
    assert [c.kept_loaded for c in events if isinstance(c, Compaction)] == [(ADD, E)]
    assert [t.key for t in events if isinstance(t, RequestTurn)] == [f"msg_0{n}" for n in range(1, 10)]
    assert [u.tool for u in events if isinstance(u, ToolUse)] == [E, ADD, E, SAVE]

    session = derive(events)
    assert session.counts() == {
        "searches": 4,
        "misses": 1,
        "loads": 4,
        "loads_never_called": 2,
        "calls": 4,
        "calls_without_load": 1,
        "requests": 9,
    }
    # echo: loaded before msg_02, carried through the compaction to msg_09 (8 requests); add: msg_05..09;
    # multiply (first load): msg_05 only, then dropped; multiply (again, select): msg_08, msg_09.
    assert [(load.tool, load.called, load.requests_after) for load in session.loads] == [
        (E, 2, 8),
        (ADD, 1, 5),
        (MUL, 0, 1),
        (MUL, 0, 2),
    ]
    assert session.load_to_call_rate == 0.5
    # The MCP calls themselves are still stored as calls.
    assert sorted(c.tool for c in items if isinstance(c, ObservedCall)) == ["add", "echo", "echo", "save"]


def test_claude_code_stream_json_without_timestamps_goes_by_line_order() -> None:
    items = read("claude_code_stream_tool_search.jsonl")
    assert_reconciles(items, 13)
    (events,) = discovered(items).values()
    session = derive(events)
    assert session.counts() == {
        "searches": 3,
        "misses": 1,
        "loads": 2,
        "loads_never_called": 1,
        "calls": 2,
        "calls_without_load": 0,
        "requests": 5,
    }
    assert session.total_deferred == 42
    # multiply was loaded, then dropped by the compaction before any request carried it
    assert [(load.tool, load.called, load.requests_after, load.dropped_by) for load in session.loads] == [
        (E, 2, 4, None),
        (MUL, 0, 0, "sc-1"),
    ]


def test_a_malformed_tool_search_line_is_quarantined_and_the_other_calls_stay() -> None:
    items = read("claude_code_tool_search_malformed.jsonl")
    assert_reconciles(items, 6)
    outcomes = {o.line_no: o for o in items if isinstance(o, LineOutcome)}
    assert outcomes[4].status == "quarantined"
    assert outcomes[4].reason == "malformed_tool_search: tool_use_result.matches is not a list of names"
    assert sorted(c.client_call_id for c in items if isinstance(c, ObservedCall)) == ["toolu_m1", "toolu_m2"]
    (events,) = discovered(items).values()
    assert not [e for e in events if isinstance(e, ToolSearch)]
    assert [u.key for u in events if isinstance(u, ToolUse)] == ["toolu_m1", "toolu_m2"]


@pytest.mark.parametrize("name", ["anthropic_tool_search.jsonl", "anthropic_tool_search.har"])
def test_anthropic_api_with_defer_loading_and_the_regex_search_tool(name: str) -> None:
    items = read(name)
    assert not [c for c in items if isinstance(c, ObservedCall)]
    outcomes = [o for o in items if isinstance(o, LineOutcome)]
    assert {(o.status, o.reason) for o in outcomes} == {("ignored", "model_api")}
    sessions = discovered(items)
    assert len(sessions) == 1
    events = next(iter(sessions.values()))
    session = derive(events)
    assert session.counts() == {
        "searches": 2,
        "misses": 1,
        "loads": 2,
        "loads_never_called": 1,
        "calls": 2,
        "calls_without_load": 1,
        "requests": 3,
    }
    assert [(s.search_tool, s.query, s.matches) for s in session.searches] == [
        ("tool_search_tool_regex", "weather", ("get_weather", "get_forecast")),
        ("tool_search_tool_regex", "(?i)mail|smtp", ()),
    ]
    # three tools carry defer_loading: true in every request
    assert session.total_deferred == 3
    # both loaded during the first request: carried by the second and third
    assert [(load.tool, load.called, load.requests_after) for load in session.loads] == [
        ("get_weather", 1, 2),
        ("get_forecast", 0, 2),
    ]
    assert [c.tool for c in session.calls_without_load] == ["send_email"]
