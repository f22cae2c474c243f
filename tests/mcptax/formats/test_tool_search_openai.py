"""OpenAI Responses ``tool_search``: searches paired by call_id, loads from functions and
namespaces, function calls, and one model request per response, through the envelope reader."""

from __future__ import annotations

import json

from mcptax.discovery import derive
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
    # loaded with the second request's input: carried by resp_2 and resp_3
    assert session.loads[0].requests_after == 2
