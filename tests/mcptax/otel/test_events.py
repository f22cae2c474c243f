"""The Django-free core of telemetry: decoding OTLP bodies, classifying records, the record key."""

from __future__ import annotations

import json

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from mcptax.otel import decode_body
from mcptax.otel.decode import OtelRecord, Unreadable, check_body
from mcptax.otel.events import ApiRequest, Ignored, Quarantined, ToolResult, classify, record_key

SESSION = {"session.id": "s-1", "app.version": "2.1.220"}


def body(events: list[tuple[str, dict]], service: str = "claude-code") -> bytes:
    request = ExportLogsServiceRequest()
    group = request.resource_logs.add()
    group.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value=service)))
    scope = group.scope_logs.add()
    for name, attributes in events:
        record = scope.log_records.add(time_unix_nano=1_796_032_800_000_000_000)
        record.body.string_value = name
        for key, value in attributes.items():
            if isinstance(value, int):
                record.attributes.append(KeyValue(key=key, value=AnyValue(int_value=value)))
            else:
                record.attributes.append(KeyValue(key=key, value=AnyValue(string_value=value)))
    return request.SerializeToString()


def one(data: bytes) -> OtelRecord:
    (record,) = decode_body(data)
    assert isinstance(record, OtelRecord)
    return record


def test_claude_code_event_name_comes_from_the_body_and_values_keep_their_types():
    record = one(
        body([("claude_code.api_request", {**SESSION, "event.name": "api_request", "input_tokens": 12})])
    )
    assert record.event == "claude_code.api_request" and record.attributes["input_tokens"] == 12
    assert record.resource == {"service.name": "claude-code"}
    classified = classify(record)
    assert isinstance(classified, ApiRequest) and classified.input_tokens == 12


def test_an_mcp_tool_result_without_details_is_a_call_without_content():
    attributes = {
        **SESSION,
        "event.name": "tool_result",
        "tool_name": "mcp_tool",
        "success": "false",
        "tool_use_id": "t1",
    }
    classified = classify(one(body([("claude_code.tool_result", attributes)])))
    assert isinstance(classified, ToolResult)
    assert (classified.arguments, classified.success, classified.server, classified.tool) == (
        None,
        False,
        "",
        "mcp_tool",
    )


def test_long_tool_input_values_are_marked_as_possibly_cut():
    tool_input = json.dumps({"content": "x" * 512, "path": "a"})
    attributes = {
        **SESSION,
        "tool_name": "mcp__docs__write",
        "tool_input": tool_input,
        "event.name": "tool_result",
    }
    classified = classify(one(body([("claude_code.tool_result", attributes)])))
    assert isinstance(classified, ToolResult) and classified.truncated_pointers == ("/content",)


def test_unknown_events_and_missing_sessions_are_quarantined_known_ones_ignored():
    assert classify(one(body([("vendor.thing", {**SESSION})]))) == Quarantined("unknown_event:vendor.thing")
    missing = one(body([("claude_code.tool_result", {"event.name": "tool_result", "tool_name": "x"})]))
    assert classify(missing) == Quarantined("missing_attribute:session.id")
    prompt = one(body([("claude_code.user_prompt", {**SESSION, "event.name": "user_prompt"})]))
    assert classify(prompt) == Ignored("otel_user_prompt")


def test_the_record_key_is_the_same_for_a_resent_record_and_differs_by_sequence():
    first = one(body([("claude_code.tool_result", {**SESSION, "event.sequence": 4, "tool_use_id": "t"})]))
    again = one(body([("claude_code.tool_result", {**SESSION, "event.sequence": 4, "tool_use_id": "t"})]))
    other = one(body([("claude_code.tool_result", {**SESSION, "event.sequence": 5, "tool_use_id": "t"})]))
    key = record_key("claude_code", "s-1", "claude_code.tool_result", first)
    assert key == record_key("claude_code", "s-1", "claude_code.tool_result", again)
    assert key != record_key("claude_code", "s-1", "claude_code.tool_result", other)


def test_bodies_that_are_no_otlp_request():
    assert decode_body(b"\x0a\xff\xff") == [Unreadable(1, "invalid_protobuf", b"\x0a\xff\xff")]
    assert check_body(b"\x0a\xff\xff") == (1, 1, "invalid_protobuf")
    assert check_body(b'{"nope": 1}') == (1, 1, "not_otlp_logs")
    assert check_body(body([("claude_code.auth", SESSION)] * 3)) == (3, 0, "")
    mixed = json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [{"attributes": []}, 7]}]}]}).encode()
    assert check_body(mixed) == (2, 1, "not_a_log_record")
