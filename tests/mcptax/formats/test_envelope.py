"""Envelope text-only and truncated frames (mcptax/formats/envelope.py), as mcpsnoop and our proxy
write them: ``text`` without ``raw`` for non-JSON output, a cut copy of a large frame in ``text``."""

from __future__ import annotations

import hashlib
import json

from mcptax.bulk import find_bulk_arguments
from mcptax.formats import read_calls
from tests.mcptax.formats.helpers import LOGS, assert_reconciles, calls_of, outcomes_of, run, seen_after_cut


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


def test_envelope_calls_and_line_fates() -> None:
    items = run("envelope.jsonl")
    outcomes = outcomes_of(items)
    calls = {(c.session_key, c.jsonrpc_id): c for c in calls_of(items)}
    assert len(calls) == 5
    assert {n: (o.status, o.reason) for n, o in outcomes.items() if o.status != "call"} == {
        1: ("ignored", "meta"),
        2: ("ignored", "session_context"),
        3: ("ignored", "session_context"),
        4: ("ignored", "notification"),
        5: ("ignored", "not_a_tool_call"),
        6: ("ignored", "not_a_tool_call"),
        7: ("ignored", "stderr"),
        14: ("quarantined", "invalid_json"),
        15: ("ignored", "orphan_response"),
        17: ("ignored", "blank"),
        18: ("quarantined", "missing_field:session_id"),
    }
    # Quarantined lines keep their raw bytes exactly.
    raw_line_14 = (LOGS / "envelope.jsonl").read_bytes().splitlines()[13]
    assert outcomes[14].raw == raw_line_14

    write = calls[("s-7f3a", 2)]
    assert (write.tool, write.server_label, write.line_numbers) == ("write_file", "files", (8, 9))
    assert write.agent.family == "claude-code" and write.agent.version == "2.0.14"
    assert write.server_info == {"name": "acme-files", "version": "1.4.0"}
    assert write.claudecode_tool_use_id == "toolu_01HXcM2f8ZqV3wR9t5Ybe7Ld"
    assert write.duration_ms == 1750.0 and write.is_error is False
    canonical = json.dumps(write.arguments, separators=(",", ":"), ensure_ascii=False).encode()
    assert write.arguments_sha256 == hashlib.sha256(canonical).hexdigest()
    assert write.arguments_raw_bytes == len(canonical)
    (bulk,) = find_bulk_arguments(write.arguments)
    assert bulk.pointer == "/content" and bulk.sha256 == write.result["structuredContent"]["sha256"]

    # A batch: the call inside pairs with its response inside the response batch.
    rows = calls[("s-7f3a", 3)]
    assert rows.line_numbers == (10, 11) and rows.result["content"][0]["text"] == "appended 120 rows"
    assert find_bulk_arguments(rows.arguments)[0].elements == 120

    failed = calls[("s-7f3a", 5)]
    assert failed.jsonrpc_error["code"] == -32602 and failed.result is None and failed.is_error is None

    unanswered = calls[("s-7f3a", 7)]
    assert unanswered.unanswered and unanswered.response_ts is None and unanswered.line_numbers == (16,)

    # 2026-07-28 style: no initialize; the agent comes from _meta; the capture was cut.
    modern = calls[("h-91c2", "req-1")]
    assert (modern.agent.family, modern.agent.version, modern.agent.source) == ("gemini-cli", "0.9.0", "meta")
    assert modern.conn_id == "c1" and modern.transport == "http"
    assert modern.capture_truncated and modern.truncated_pointers == ("/params/arguments/csv",)


def test_redacted_envelope_keeps_digest_figures() -> None:
    (call,) = calls_of(run("envelope_redacted.jsonl"))
    (bulk,) = find_bulk_arguments(call.arguments)
    assert (bulk.pointer, bulk.kind, bulk.content_known) == ("/content", "digest", False)
    # The digest stands for the same README the unredacted log carries in full.
    clear = next(c for c in calls_of(run("envelope.jsonl")) if c.jsonrpc_id == 2)
    (original,) = find_bulk_arguments(clear.arguments)
    assert (bulk.sha256, bulk.bytes, bulk.lines, bulk.tokens) == (
        original.sha256,
        original.bytes,
        original.lines,
        400,
    )
    assert call.redacted
