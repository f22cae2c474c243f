"""The Claude Code transcript parser (mcptax/formats/claude_code.py)."""

from __future__ import annotations

import json

from mcptax.formats import read_calls
from tests.mcptax.formats.conftest import assert_reconciles, calls_of, outcomes_of, run


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
