"""Envelope text-only and truncated frames (mcptax/formats/envelope.py), as mcpsnoop and our proxy
write them: ``text`` without ``raw`` for non-JSON output, a cut copy of a large frame in ``text``."""

from __future__ import annotations

import json

from mcptax.formats import read_calls
from tests.mcptax.formats.helpers import assert_reconciles, calls_of, outcomes_of, seen_after_cut


def _line(seq: int, direction: str, **fields: object) -> bytes:
    record = {
        "session_id": "snoop-1",
        "server_label": "files",
        "seq": seq,
        "ts": f"2026-02-01T08:00:{seq:02d}Z",
    }
    return json.dumps({**record, "direction": direction, "transport": "stdio", **fields}).encode() + b"\n"


BIG = "x" * 5000
REQUEST = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {"name": "write_file", "arguments": {"path": "a.md", "content": BIG}},
}
RESPONSE = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "ok"}]}}


def test_non_json_output_lines_are_ignored_with_their_own_reason() -> None:
    lines = [
        _line(1, "s2c", text="Starting server on stdio..."),  # mcpsnoop: text, no raw
        _line(2, "s2c", raw=None, text="not json at all", status="invalid_json"),  # our proxy
    ]
    items = list(read_calls(lines, "envelope"))
    assert_reconciles(items, 2)
    outcomes = outcomes_of(items)
    assert [(o.status, o.reason) for o in (outcomes[1], outcomes[2])] == [
        ("ignored", "non_json_output"),
        ("ignored", "non_json_output"),
    ]


def test_a_truncated_request_in_text_still_forms_its_call() -> None:
    cut = json.dumps(REQUEST)[:1024]
    lines = [_line(1, "c2s", text=cut, truncated=True), _line(2, "s2c", raw=RESPONSE)]
    items = list(read_calls(lines, "envelope"))
    assert_reconciles(items, 2)
    (call,) = calls_of(items)
    assert (call.jsonrpc_id, call.tool, call.server_label) == (7, "write_file", "files")
    assert call.capture_truncated and call.line_numbers == (1, 2) and not call.unanswered
    assert call.is_error is False and call.request_ts == "2026-02-01T08:00:01Z"
    assert outcomes_of(items)[2].status == "call"  # the response is no orphan


def test_a_truncated_raw_string_forms_its_call_too() -> None:
    cut = json.dumps(REQUEST)[:900]
    lines = [_line(1, "c2s", raw=cut, truncated=True), _line(2, "s2c", raw=RESPONSE)]
    (call,) = calls_of(read_calls(lines, "envelope"))
    assert call.tool == "write_file" and call.capture_truncated


def test_a_truncated_request_cut_before_its_id_pairs_with_the_next_unmatched_response() -> None:
    lines = [
        _line(1, "c2s", text='{"jsonrpc": "2.0", "method": "tools/ca', truncated=True),
        _line(2, "s2c", raw=RESPONSE),
    ]
    items = list(read_calls(lines, "envelope"))
    assert_reconciles(items, 2)
    (call,) = calls_of(items)
    assert call.jsonrpc_id == 7 and call.capture_truncated and call.line_numbers == (1, 2)


def test_a_truncated_frame_that_is_no_tool_call_is_not_kept_as_one() -> None:
    cut = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": BIG}})[:200]
    items = list(read_calls([_line(1, "c2s", text=cut, truncated=True)], "envelope"))
    assert_reconciles(items, 1)
    assert not calls_of(items) and outcomes_of(items)[1].status == "ignored"


def test_a_truncated_request_keeps_the_arguments_its_prefix_holds() -> None:
    cut = json.dumps(REQUEST)[:1024]
    lines = [_line(1, "c2s", text=cut, truncated=True), _line(2, "s2c", raw=RESPONSE)]
    (call,) = calls_of(read_calls(lines, "envelope"))
    seen = seen_after_cut(cut, '"content": "')
    assert seen and set(seen) == {"x"} and len(seen) < len(BIG)
    assert call.arguments == {"path": "a.md", "content": seen}
    assert call.truncated_pointers == ("/content",) and call.capture_truncated


def test_a_cut_inside_an_escape_keeps_the_text_before_it() -> None:
    text = 'line one\nline "two"\n' * 200
    request = {**REQUEST, "params": {"name": "patch", "arguments": {"diff": text, "dry_run": False}}}
    full = json.dumps(request)
    at = full.index("one\\n", 500) + len("one\\")  # between the backslash and the n
    cut = full[:at]
    (call,) = calls_of(
        read_calls([_line(1, "c2s", text=cut, truncated=True), _line(2, "s2c", raw=RESPONSE)], "envelope")
    )
    seen = seen_after_cut(cut, '"diff": "')
    assert text.startswith(seen) and seen.endswith("line one")
    assert call.arguments == {"diff": seen} and call.truncated_pointers == ("/diff",)


def test_when_the_response_is_cut_too_the_result_is_unknown_not_success() -> None:
    request_cut = json.dumps(REQUEST)[:1024]
    answer = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": BIG}]}}
    lines = [
        _line(1, "c2s", text=request_cut, truncated=True),
        _line(2, "s2c", text=json.dumps(answer)[:600], truncated=True),
    ]
    items = list(read_calls(lines, "envelope"))
    assert_reconciles(items, 2)
    (call,) = calls_of(items)
    assert call.is_error is None and call.result is None and not call.unanswered
    assert call.line_numbers == (1, 2) and outcomes_of(items)[2].status == "call"
    error = {**answer, "result": {"isError": True, "content": [{"type": "text", "text": BIG}]}}
    lines[1] = _line(2, "s2c", text=json.dumps(error)[:600], truncated=True)
    (call,) = calls_of(read_calls(lines, "envelope"))
    assert call.is_error is True
