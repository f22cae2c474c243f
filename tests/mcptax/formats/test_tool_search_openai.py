"""OpenAI Responses ``tool_search``: searches paired by call_id, loads from functions and
namespaces, function calls, and one model request per response, through the envelope reader."""

from __future__ import annotations

import json

from mcptax.discovery import SessionDiscovery, derive
from mcptax.formats import read_calls
from mcptax.formats.records import Discovered

TOOLS = [
    {"type": "tool_search"},
    {"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "defer_loading": True},
    {
        "type": "namespace",
        "name": "crm",
        "description": "Customer records",
        "tools": [
            {
                "type": "function",
                "name": "find_customer",
                "parameters": {"type": "object"},
                "defer_loading": True,
            },
            {
                "type": "function",
                "name": "open_ticket",
                "parameters": {"type": "object"},
                "defer_loading": True,
            },
        ],
    },
]
SEARCH = {
    "type": "tool_search_call",
    "id": "tsc_1",
    "call_id": "call_s1",
    "execution": "client",
    "status": "completed",
    "arguments": {"query": "customer lookup", "limit": 5},
}
OUTPUT = {
    "type": "tool_search_output",
    "call_id": "call_s1",
    "execution": "client",
    "status": "completed",
    "tools": [{"type": "namespace", "name": "crm", "tools": [TOOLS[2]["tools"][0]]}],
}
MISS_CALL = {**SEARCH, "id": "tsc_2", "call_id": "call_s2", "arguments": {"query": "invoices"}}
MISS = {**OUTPUT, "call_id": "call_s2", "tools": []}
CALL = {
    "type": "function_call",
    "call_id": "call_f1",
    "namespace": "crm",
    "name": "find_customer",
    "arguments": "{}",
}


def line(seq: int, direction: str, raw: dict) -> bytes:
    frame = {
        "session_id": "resp-conv",
        "server_label": "api.openai.com",
        "seq": seq,
        "ts": f"2026-05-04T11:00:{seq:02d}Z",
        "direction": direction,
        "transport": "http",
        "raw": raw,
    }
    return json.dumps(frame).encode() + b"\n"


def assert_the_conversation(session: SessionDiscovery) -> None:
    """One search that loaded find_customer (called), one that found nothing, three responses."""
    assert [(s.query, s.matches, s.total_deferred) for s in session.searches] == [
        ("customer lookup", ("crm.find_customer",), 3),
        ("invoices", (), 3),
    ]
    assert session.counts() == {
        "searches": 2,
        "misses": 1,
        "loads": 1,
        "loads_never_called": 0,
        "calls": 1,
        "calls_without_load": 0,
        "requests": 3,
    }


def test_responses_tool_search_through_the_proxy() -> None:
    lines = [
        line(1, "c2s", {"model": "gpt-5.4", "tools": TOOLS, "input": "Find ACME"}),
        line(2, "s2c", {"id": "resp_1", "object": "response", "output": [SEARCH]}),
        line(3, "c2s", {"model": "gpt-5.4", "tools": TOOLS, "input": [SEARCH, OUTPUT]}),
        line(4, "s2c", {"id": "resp_2", "object": "response", "output": [CALL]}),
        line(
            5, "c2s", {"model": "gpt-5.4", "tools": TOOLS, "input": [SEARCH, OUTPUT, CALL, MISS_CALL, MISS]}
        ),
        line(6, "s2c", {"id": "resp_3", "object": "response", "output": []}),
    ]
    items = list(read_calls(lines, "envelope"))
    events = [e for i in items if isinstance(i, Discovered) for e in i.events]
    session = derive(events)
    assert_the_conversation(session)
    # loaded with the second request's input: carried by resp_2 and resp_3
    assert session.loads[0].requests_after == 2


def har_entry(second: int, request: dict, response: dict, *, streamed: bool = False) -> dict:
    if streamed:  # the Responses API's SSE: the whole response comes in response.completed
        done = {"type": "response.completed", "response": response}
        text = f"event: response.created\ndata: {json.dumps({'type': 'response.created'})}\n\n"
        text += f"event: response.completed\ndata: {json.dumps(done)}\n\n"
        content = {"mimeType": "text/event-stream", "text": text}
    else:
        content = {"mimeType": "application/json", "text": json.dumps(response)}
    return {
        "startedDateTime": f"2026-05-04T11:00:{second:02d}.000Z",
        "time": 500,
        "request": {
            "method": "POST",
            "url": "https://api.openai.com/v1/responses",
            "headers": [],
            "postData": {"mimeType": "application/json", "text": json.dumps(request)},
        },
        "response": {"status": 200, "headers": [], "content": content},
    }


def test_responses_tool_search_as_a_har_with_a_streamed_answer() -> None:
    """The same conversation recorded as a HAR (mitmproxy, a browser): the last answer streamed."""
    entries = [
        har_entry(
            1,
            {"model": "gpt-5.4", "tools": TOOLS, "input": "Find ACME"},
            {"id": "resp_1", "object": "response", "output": [SEARCH]},
        ),
        har_entry(
            2,
            {"model": "gpt-5.4", "tools": TOOLS, "input": [SEARCH, OUTPUT]},
            {"id": "resp_2", "object": "response", "output": [CALL]},
        ),
        har_entry(
            3,
            {"model": "gpt-5.4", "tools": TOOLS, "input": [SEARCH, OUTPUT, CALL, MISS_CALL, MISS]},
            {"id": "resp_3", "object": "response", "output": []},
            streamed=True,
        ),
    ]
    har = {"log": {"version": "1.2", "entries": entries}}
    items = list(read_calls([json.dumps(har).encode()], "har"))
    assert len({i.session_key for i in items if isinstance(i, Discovered)}) == 1  # one conversation
    events = [e for i in items if isinstance(i, Discovered) for e in i.events]
    session = derive(events)
    assert_the_conversation(session)
    assert session.loads[0].requests_after == 2
