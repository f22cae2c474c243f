"""The HAR parser (mcptax/formats/har.py): entries, SSE bodies, batches, sessions."""

from __future__ import annotations

import json

from mcptax.formats import har, read_calls
from mcptax.formats.har import split_sse
from mcptax.formats.records import LineEvent
from tests.mcptax.formats.helpers import LOGS, calls_of, outcomes_of, run


def test_har_entries_sse_batches_and_sessions() -> None:
    items = run("mcp_session.har")
    outcomes = outcomes_of(items)
    assert {n: (o.status, o.reason) for n, o in outcomes.items()} == {
        1: ("ignored", "session_context"),
        2: ("ignored", "notification"),
        3: ("call", None),
        4: ("ignored", "not_mcp"),
        5: ("call", None),
        6: ("ignored", "session_end"),
        7: ("quarantined", "invalid_json"),
    }
    calls = {c.jsonrpc_id: c for c in calls_of(items)}
    assert set(calls) == {2, 3, 4}
    sid = "2f1b7c8e-5d2a-4c1e-9a7b-0e6f3d2c1b00"
    assert {c.session_key for c in calls.values()} == {sid}
    # The initialize response body was base64 and assigned the session by header.
    assert calls[2].agent.family == "cursor" and calls[2].server_info["version"] == "0.7.2"
    # The SSE body held a progress notification then the result.
    assert calls[2].result["content"][0]["text"] == "rendered" and calls[2].duration_ms == 1250.0
    assert calls[2].server_label == "127.0.0.1:8931/mcp"
    # One batch entry, two calls, responses in the other order over SSE.
    assert calls[3].is_error is True and calls[4].is_error is False
    assert outcomes[5].call_keys == tuple(c.dedupe_key for c in calls_of(items) if c.jsonrpc_id in (3, 4))


def test_har_that_is_not_json_is_one_quarantined_line() -> None:
    items = list(read_calls([b'{"log": {"entries": [', b"{}"], "har"))
    assert [(o.line_no, o.status, o.reason) for o in items] == [(1, "quarantined", "invalid_json")]
    assert items[0].raw == b'{"log": {"entries": [{}'


def test_split_sse() -> None:
    body = ': keepalive\r\nevent: message\r\ndata: {"a":\r\ndata: 1}\r\n\r\nid: 7\ndata:\n\ndata: {"b":2}'
    assert list(split_sse(body)) == [("message", '{"a":\n1}'), ("message", '{"b":2}')]


def _streamed(data: bytes, block: int = 97) -> list[LineEvent]:
    # Above whole_document_bytes the document is streamed: fed here in small odd-sized blocks.
    blocks = [data[i : i + block] for i in range(0, len(data), block)]
    return list(har.parse(blocks, whole_document_bytes=100))


def _shape(events: list[LineEvent]) -> list[tuple]:
    return [
        (e.line_no, e.status, e.reason, [(f.kind, f.message, f.session_key) for f in e.frames])
        for e in events
    ]


def test_a_large_har_is_streamed_entry_by_entry_with_the_same_events() -> None:
    data = (LOGS / "mcp_session.har").read_bytes()
    whole = list(har.parse([data]))
    assert len(data) > 100 and _shape(_streamed(data)) == _shape(whole)
    # Minified (one line) or pretty-printed, the same.
    minified = json.dumps(json.loads(data), separators=(",", ":")).encode()
    assert _shape(_streamed(minified, block=4096)) == _shape(whole)


def test_a_streamed_har_that_breaks_keeps_the_entries_before_and_quarantines_the_rest() -> None:
    document = json.loads((LOGS / "mcp_session.har").read_bytes())
    data = json.dumps(document).encode()
    cut = data.index(b'"startedDateTime"', data.index(b'"startedDateTime"') + 1)  # inside entry 2
    events = _streamed(data[:cut] + b"!!")
    assert [(e.line_no, e.status, e.reason) for e in events] == [
        (1, "frame", None),
        (2, "quarantined", "invalid_json"),
    ]
    assert events[-1].notes == ("after entry 1",)
    nothing = _streamed(json.dumps({"log": {"pages": ["x" * 200]}}).encode())
    assert [(e.line_no, e.status, e.reason) for e in nothing] == [(1, "quarantined", "unknown_shape")]
    deep = {"log": {"entries": [{"request": {"a": _nest(250)}}]}}
    assert [(e.status, e.reason) for e in _streamed(json.dumps(deep).encode())] == [
        ("quarantined", "too_deep")
    ]


def _nest(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value
