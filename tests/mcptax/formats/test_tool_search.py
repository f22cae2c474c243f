"""Tool discovery read from logs: Claude Code transcripts and stream-json, Anthropic API traffic
through the proxy (envelope) and as a HAR. Expected figures are worked out by hand from the
fixtures (tests/data/logs/README.md describes each one)."""

from __future__ import annotations

import json
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
    assert outcomes[4].reason == "malformed_tool_search: toolUseResult.matches is not a list of names"
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


def sse(*events: dict) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def test_a_streamed_anthropic_response_in_a_har_adds_up_to_its_message() -> None:
    """Claude Code streams: the response is message_start, content_block_start and deltas."""
    request = {
        "model": "claude-sonnet-4-5",
        "stream": True,
        "tools": [{"name": "get_weather", "defer_loading": True}],
        "messages": [{"role": "user", "content": "weather?"}],
        "metadata": {"user_id": "user_x_session_abc"},
    }
    stream = sse(
        {
            "type": "message_start",
            "message": {"id": "msg_stream_1", "type": "message", "role": "assistant", "content": []},
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "server_tool_use",
                "id": "srvtoolu_s",
                "name": "tool_search_tool_bm25",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"query": "wea'},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": 'ther"}'},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "tool_search_tool_result",
                "tool_use_id": "srvtoolu_s",
                "content": {
                    "type": "tool_search_tool_search_result",
                    "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}],
                },
            },
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "message_stop"},
    )
    har = {
        "log": {
            "version": "1.2",
            "entries": [
                {
                    "startedDateTime": "2026-05-04T10:00:00.000Z",
                    "time": 900,
                    "request": {
                        "method": "POST",
                        "url": "https://api.anthropic.com/v1/messages",
                        "headers": [],
                        "postData": {"mimeType": "application/json", "text": json.dumps(request)},
                    },
                    "response": {
                        "status": 200,
                        "headers": [{"name": "content-type", "value": "text/event-stream"}],
                        "content": {"mimeType": "text/event-stream", "text": stream},
                    },
                }
            ],
        }
    }
    items = list(read_calls([json.dumps(har).encode()], "har"))
    ((session, events),) = discovered(items).items()
    assert session == "api:user_x_session_abc"
    derived = derive(events)
    assert [(s.search_tool, s.query, s.matches, s.total_deferred) for s in derived.searches] == [
        ("tool_search_tool_bm25", "weather", ("get_weather",), 1)
    ]
    assert derived.requests == 1


def test_a_malformed_search_sharing_its_line_with_a_call_keeps_the_call() -> None:
    session = "0aa1"
    lines = [
        {
            "type": "assistant",
            "sessionId": session,
            "timestamp": "2026-05-04T09:00:01Z",
            "message": {
                "id": "m1",
                "content": [
                    {"type": "tool_use", "id": "ts1", "name": "ToolSearch", "input": {"query": 42}},
                    {"type": "tool_use", "id": "c1", "name": E, "input": {"text": "x"}},
                ],
            },
        },
        {
            "type": "user",
            "sessionId": session,
            "timestamp": "2026-05-04T09:00:02Z",
            "message": {
                "content": [
                    {"type": "tool_result", "tool_use_id": "ts1", "content": "bad query"},
                    {"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "x"}]},
                ]
            },
        },
    ]
    items = list(read_calls([json.dumps(r).encode() + b"\n" for r in lines], "claude-code"))
    assert_reconciles(items, 2)
    (call,) = [c for c in items if isinstance(c, ObservedCall)]
    assert (call.client_call_id, call.result) == (
        "c1",
        {"content": [{"type": "text", "text": "x"}], "isError": False},
    )
    outcomes = {o.line_no: o.status for o in items if isinstance(o, LineOutcome)}
    assert outcomes == {1: "call", 2: "call"}
    # the line's other discovery records stand: its model request and the MCP call
    (events,) = discovered(items).values()
    assert [type(e).__name__ for e in events] == ["RequestTurn", "ToolUse"]


def test_matches_as_objects_and_a_deferred_built_in_tool_called_after_its_load() -> None:
    """Some versions write matches as {"tool_name"} objects; Claude Code defers some of its own
    tools (WebSearch), whose call then follows the load like an MCP tool's."""
    session = "0bb2"
    lines = [
        {
            "type": "assistant",
            "sessionId": session,
            "timestamp": "2026-05-04T09:00:01Z",
            "message": {
                "id": "m1",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "ts1",
                        "name": "ToolSearch",
                        "input": {"query": "select:WebSearch"},
                    }
                ],
            },
        },
        {
            "type": "user",
            "sessionId": session,
            "timestamp": "2026-05-04T09:00:02Z",
            "toolUseResult": {
                "matches": [{"tool_name": "WebSearch"}],
                "query": "select:WebSearch",
                "total_deferred_tools": 21,
            },
            "message": {
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "ts1",
                        "content": [{"type": "text", "text": "found"}],
                    }
                ]
            },
        },
        {
            "type": "assistant",
            "sessionId": session,
            "timestamp": "2026-05-04T09:00:03Z",
            "message": {
                "id": "m2",
                "content": [
                    {"type": "tool_use", "id": "w1", "name": "WebSearch", "input": {"query": "mcp"}},
                    {"type": "tool_use", "id": "b1", "name": "Bash", "input": {"command": "ls"}},
                ],
            },
        },
    ]
    items = list(read_calls([json.dumps(r).encode() + b"\n" for r in lines], "claude-code"))
    (events,) = discovered(items).values()
    derived = derive(events)
    assert [(s.query, s.matches, s.total_deferred) for s in derived.searches] == [
        ("select:WebSearch", ("WebSearch",), 21)
    ]
    assert [(load.tool, load.called, load.requests_after) for load in derived.loads] == [("WebSearch", 1, 1)]
    # Bash was never loaded: an eager tool
    assert [c.tool for c in derived.calls_without_load] == ["Bash"]


def claude_line(kind: str, second: int, content: list, message_id: str | None = None) -> bytes:
    """One transcript line of session 0cc3 at 09:00:<second>."""
    message: dict = {"content": content} | ({"id": message_id} if message_id else {})
    record = {
        "type": kind,
        "sessionId": "0cc3",
        "timestamp": f"2026-05-04T09:00:{second:02d}Z",
        "message": message,
    }
    return json.dumps(record).encode() + b"\n"


def test_a_quarantined_search_line_keeps_its_model_request_and_its_other_search() -> None:
    """A line holding nothing but searches is quarantined when one of them cannot be read; the
    model request it was and the search beside it that can be read are still the session's."""
    search = {"type": "tool_use", "name": "ToolSearch"}
    lines = [
        claude_line(
            "assistant",
            1,
            [search | {"id": "ts1", "input": {"query": "select:" + E}}, search | {"id": "ts2", "input": {}}],
            "m1",
        ),
        claude_line(
            "user",
            2,
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "ts1",
                    "content": [{"type": "tool_reference", "tool_name": E}],
                },
                {"type": "tool_result", "tool_use_id": "ts3", "content": [{"type": "tool_reference"}]},
            ],
        ),
        claude_line("assistant", 3, [{"type": "tool_use", "id": "c1", "name": E, "input": {}}], "m2"),
    ]
    items = list(read_calls(lines, "claude-code"))
    assert_reconciles(items, 3)
    outcomes = {o.line_no: (o.status, o.reason) for o in items if isinstance(o, LineOutcome)}
    assert outcomes[1] == ("quarantined", "malformed_tool_search: ToolSearch input has no query")
    assert outcomes[2] == ("quarantined", "malformed_tool_search: a tool_reference has no tool_name")
    (events,) = discovered(items).values()
    derived = derive(events)
    assert derived.requests == 2
    assert [(s.key, s.query, s.matches) for s in derived.searches] == [("ts1", "select:" + E, (E,))]
    assert [(load.tool, load.called, load.requests_after) for load in derived.loads] == [(E, 1, 1)]
