"""Codex rollouts (mcptax/formats/codex.py): namespaced MCP calls, ``mcp_tool_call_end`` records,
error outputs and the session start as the timestamp base."""

from __future__ import annotations

import hashlib
import json

from mcptax.bulk import find_bulk_arguments
from mcptax.formats import ObservedCall, detect_format, read_calls
from tests.mcptax.formats.helpers import LOGS, assert_reconciles, calls_of, outcomes_of, run


def _read(name: str) -> tuple[list, int]:
    data = (LOGS / name).read_bytes()
    assert detect_format(data) == "codex"
    return list(read_calls(data.splitlines(keepends=True), "codex")), len(data.splitlines())


def _by_id(calls: list[ObservedCall]) -> dict[str, ObservedCall]:
    return {c.client_call_id or "": c for c in calls}


def test_namespaced_function_calls_and_end_records_form_each_call_once() -> None:
    items, lines = _read("codex_rollout_mcp_events.jsonl")
    assert_reconciles(items, lines)
    calls = _by_id(calls_of(items))
    assert sorted(calls) == ["call_A1", "call_B2", "call_C3"]  # the built-in shell call is no MCP call

    write = calls["call_A1"]
    assert (write.server_label, write.tool) == ("files", "write_file")
    assert write.arguments == {"path": "notes.md", "content": "# Notes\n\n- first\n- second\n"}
    assert write.is_error is False and write.duration_ms == 250.0
    assert write.request_ts == "2025-11-20T09:00:03.000Z"
    assert write.result == {"content": [{"type": "text", "text": "wrote 27 bytes"}], "isError": False}
    assert write.line_numbers == (3, 5)

    failed = calls["call_B2"]
    assert (failed.server_label, failed.tool, failed.is_error) == ("tracker", "get_ticket", True)
    assert failed.duration_ms == 1500.0
    assert failed.result == {
        "content": [{"type": "text", "text": "tool call failed: connection refused"}],
        "isError": True,
    }

    # An end record alone forms its call: the start is its own time minus the duration.
    alone = calls["call_C3"]
    assert (alone.server_label, alone.tool, alone.arguments) == ("files", "read_file", {"path": "notes.md"})
    assert alone.is_error is True and alone.duration_ms == 40.0
    assert (alone.request_ts, alone.response_ts) == ("2025-11-20T09:00:06.960Z", "2025-11-20T09:00:07.000Z")
    assert alone.unanswered is False

    outcomes = outcomes_of(items)
    # The output lines repeat what the end records said: counted once, as ignored lines.
    assert outcomes[6].status == outcomes[9].status == "ignored"
    assert outcomes[4].reason == "meta"  # mcp_tool_call_begin


def test_turn_output_tokens_split_over_the_namespaced_calls() -> None:
    items, _ = _read("codex_rollout_mcp_events.jsonl")
    calls = calls_of(items)
    assert {c.turn_output_tokens for c in calls} == {120}
    assert {c.turn_tool_calls for c in calls} == {4}  # three MCP calls and the shell call
    assert sum(c.output_tokens or 0 for c in calls) <= 120


def test_legacy_rollout_errors_and_session_start_timestamps() -> None:
    items, lines = _read("codex_rollout_legacy.jsonl")
    assert_reconciles(items, lines)
    calls = _by_id(calls_of(items))
    missing, found = calls["call_old1"], calls["call_old2"]
    assert (missing.server_label, missing.tool) == ("files", "read_file")
    assert missing.is_error is True and found.is_error is False
    start = "2025-05-07T17:24:21.123Z"
    assert missing.request_ts == found.request_ts == start
    assert missing.session_key == "5973b6c0-94b8-487b-a530-2aeb6098ae0e"


def test_an_error_output_string_is_an_error() -> None:
    meta = {"timestamp": "2025-11-20T09:00:00Z", "type": "session_meta", "payload": {"id": "s"}}
    call = {"type": "function_call", "name": "files__read_file", "arguments": "{}", "call_id": "c"}
    output = {"type": "function_call_output", "call_id": "c", "output": "tool call error: boom"}
    lines = [
        json.dumps(meta),
        json.dumps({"timestamp": "2025-11-20T09:00:01Z", "type": "response_item", "payload": call}),
        json.dumps({"timestamp": "2025-11-20T09:00:02Z", "type": "response_item", "payload": output}),
    ]
    (only,) = calls_of(read_calls([line + "\n" for line in lines], "codex"))
    assert only.is_error is True and only.duration_ms == 1000.0


def test_codex_raw_arguments_token_counts_and_results() -> None:
    items = run("codex_rollout.jsonl")
    calls = {c.tool: c for c in calls_of(items)}
    assert set(calls) == {"render_markdown", "load_rows"}
    render = calls["render_markdown"]
    line6 = json.loads((LOGS / "codex_rollout.jsonl").read_bytes().splitlines()[5])
    raw = line6["payload"]["arguments"]
    assert render.arguments_raw == raw and ", " in raw  # the model's own spacing is kept
    assert render.arguments_sha256 == hashlib.sha256(raw.encode()).hexdigest()
    assert render.arguments_raw_bytes == len(raw.encode())
    assert render.arguments == json.loads(raw)
    assert (render.server_label, render.client_call_id) == ("docs", "call_Rn4d8TqY2vXw")
    assert render.turn_output_tokens == 640 and render.turn_tool_calls == 2 and 0 < render.output_tokens < 640
    assert render.result["structuredContent"]["sha256"] and render.is_error is False
    assert (render.agent.family, render.agent.name, render.agent.version) == (
        "codex",
        "codex_cli_rs",
        "0.46.0",
    )
    rows = calls["load_rows"]
    assert rows.server_label == "data" and rows.output_tokens == 900 and rows.is_error is True
    assert find_bulk_arguments(rows.arguments)[0].elements == 150
    outcomes = outcomes_of(items)
    assert (outcomes[11].status, outcomes[11].reason) == ("quarantined", "invalid_arguments_json")
    assert outcomes[10].reason == "token_count" and outcomes[15].reason == "meta"


def test_an_end_record_after_the_output_completes_the_call_and_counts_its_line() -> None:
    """The output line first, then the end record (with the duration): one call, formed by both."""
    data = (LOGS / "codex_rollout_mcp_events.jsonl").read_bytes().splitlines(keepends=True)
    lines = [*data[:4], data[5], data[4]]  # function_call, begin, output, end
    items = list(read_calls(lines, "codex"))
    assert_reconciles(items, len(lines))
    (write,) = calls_of(items)
    assert (write.client_call_id, write.line_numbers, write.duration_ms) == ("call_A1", (3, 5, 6), 250.0)
    outcomes = outcomes_of(items)
    assert outcomes[5].status == outcomes[6].status == "call"
    assert outcomes[6].call_keys == (write.dedupe_key,)
