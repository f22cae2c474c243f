"""The HAR parser (mcptax/formats/har.py): entries, SSE bodies, batches, sessions."""

from __future__ import annotations

from mcptax.formats import read_calls
from mcptax.formats.har import split_sse
from tests.mcptax.formats.helpers import calls_of, outcomes_of, run


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
