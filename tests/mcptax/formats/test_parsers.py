"""Log parsers, format detection and call assembly (mcptax/formats/)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from mcptax.bulk import find_bulk_arguments
from mcptax.formats import (
    LineOutcome,
    ObservedCall,
    UnknownFormatError,
    detect_format,
    normalize_agent_family,
    parse,
    read_calls,
)
from mcptax.formats.har import split_sse
from tests.mcptax.formats.helpers import CALL, RESULT, assert_reconciles, calls_of, outcomes_of
from tests.mcptax.formats.helpers import env_line as _env

LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"
SAMPLES = {
    "envelope.jsonl": "envelope",
    "envelope_redacted.jsonl": "envelope",
    "mcp_session.har": "har",
    "claude_code_session.jsonl": "claude-code",
    "codex_rollout.jsonl": "codex",
}


def run(name: str, **kwargs) -> list[ObservedCall | LineOutcome]:
    with open(LOGS / name, "rb") as f:
        return list(read_calls(f, SAMPLES[name], **kwargs))


def units(name: str) -> int:
    data = (LOGS / name).read_bytes()
    if SAMPLES[name] == "har":
        return len(json.loads(data)["log"]["entries"])
    return len(data.splitlines())


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_detects_each_sample_format(name: str) -> None:
    assert detect_format((LOGS / name).read_bytes()[:65536]) == SAMPLES[name]


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_line_of_every_sample_is_accounted_for(name: str) -> None:
    assert_reconciles(run(name), units(name))


def test_detect_format_edge_cases() -> None:
    assert detect_format(b'\xef\xbb\xbf{"log": {"version": "1.2", "entries": []}}') == "har"
    # Detection reads a prefix: its last line is usually cut mid-way, and must not matter.
    cut = b'{"type":"summary","summary":"x","leafUuid":"u"}\n{"parentUuid":null,"sessionId":"s"'
    assert detect_format(cut) == "claude-code"
    assert detect_format(b'\n\n{"nope"\n{"session_id":"s","direction":"c2s","raw":{}}\n{"ses') == "envelope"
    assert detect_format(b'{"id":"a","timestamp":"2025-01-01T00:00:00Z","instructions":null}\n') == "codex"
    with pytest.raises(UnknownFormatError, match="cannot tell the log format.*envelope"):
        detect_format(b"hello world\n\x00\x01")
    with pytest.raises(UnknownFormatError, match="keys"):
        detect_format(b'{"foo": 1}\n')
    with pytest.raises(UnknownFormatError):
        list(parse([b"{}"], "syslog"))


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


def test_reingesting_yields_the_same_dedupe_keys() -> None:
    for name in SAMPLES:
        first = [c.dedupe_key for c in calls_of(run(name))]
        assert first == [c.dedupe_key for c in calls_of(run(name))]
        assert len(set(first)) == len(first)


def test_a_reused_id_with_the_same_request_is_still_two_calls() -> None:
    lines = [_env(1, "c2s", CALL), _env(2, "s2c", RESULT), _env(3, "c2s", CALL), _env(4, "s2c", RESULT)]
    calls = calls_of(read_calls(lines, "envelope"))
    assert [c.line_numbers for c in calls] == [(1, 2), (3, 4)]
    assert calls[0].dedupe_key != calls[1].dedupe_key


def test_an_id_reused_while_pending_emits_the_first_request_unanswered() -> None:
    other = {**CALL, "params": {"name": "t", "arguments": {"text": "b"}}}
    items = list(
        read_calls([_env(1, "c2s", CALL), _env(2, "c2s", other), _env(3, "s2c", RESULT)], "envelope")
    )
    calls = calls_of(items)
    assert [(c.arguments["text"], c.unanswered) for c in calls] == [("a", True), ("b", False)]
    assert_reconciles(items, 3)


def test_sessions_and_connections_keep_ids_apart() -> None:
    lines = [_env(1, "c2s", CALL, "s1"), _env(2, "c2s", CALL, "s2"), _env(3, "s2c", RESULT, "s2")]
    calls = calls_of(read_calls(lines, "envelope"))
    assert [(c.session_key, c.unanswered) for c in calls] == [("s2", False), ("s1", True)]


def test_oversize_line_is_quarantined_whole() -> None:
    big = _env(1, "c2s", {**CALL, "params": {"name": "t", "arguments": {"text": "x" * 5000}}})
    items = list(read_calls([big, _env(2, "s2c", RESULT)], "envelope", max_line_bytes=4096))
    first = outcomes_of(items)[1]
    assert (first.status, first.reason) == ("quarantined", "oversize_line")
    assert first.raw == big.rstrip(b"\n")  # never truncated
    assert outcomes_of(items)[2].reason == "orphan_response"


def test_line_events_carry_byte_offsets_and_accept_crlf() -> None:
    data = (
        _env(1, "c2s", CALL).replace(b"\n", b"\r\n") + b"garbage\r\n" + _env(2, "s2c", RESULT).rstrip(b"\n")
    )
    events = list(parse(data.splitlines(keepends=True), "envelope"))
    assert [e.status for e in events] == ["frame", "quarantined", "frame"]
    for event in events:
        piece = data[event.offset : event.offset + event.length]
        if event.status == "frame":
            assert json.loads(piece)["raw"] == event.frames[0].message
        else:
            assert piece == b"garbage\r\n"
    assert events[1].raw == b"garbage"
    assert sum(e.length for e in events) == len(data)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_resume_after_a_kill_accounts_for_every_line_once(name: str) -> None:
    full = run(name)
    total = units(name)
    for crash_at in range(len(full)):
        persisted = full[: crash_at + 1]
        marks = [i.watermark for i in persisted if isinstance(i, LineOutcome)]
        watermark = marks[-1] if marks else 0
        resumed = run(name, skip_through_line=watermark)
        persisted_keys = {c.dedupe_key for c in calls_of(persisted)}
        for call in calls_of(resumed):
            assert min(call.line_numbers) > watermark
        lines = {o.line_no for o in persisted if isinstance(o, LineOutcome)} | set(outcomes_of(resumed))
        assert lines == set(range(1, total + 1))
        assert {o.line_no for o in outcomes_of(resumed).values()} == set(range(watermark + 1, total + 1))
        # Every call a resumed outcome names was stored before the kill or is yielded again.
        for outcome in outcomes_of(resumed).values():
            assert set(outcome.call_keys) <= persisted_keys | {c.dedupe_key for c in calls_of(resumed)}


def test_agent_family_normalization() -> None:
    assert normalize_agent_family("claude-code") == "claude-code"
    assert normalize_agent_family("codex-mcp-client", "Codex") == "codex"
    assert normalize_agent_family("gemini-cli-mcp-client") == "gemini-cli"
    assert normalize_agent_family("cursor-vscode") == "cursor"
    assert normalize_agent_family("Visual Studio Code") == "vscode"
    assert normalize_agent_family("My Agent 2") == "my-agent-2"
    assert normalize_agent_family(None) == "unknown"


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
