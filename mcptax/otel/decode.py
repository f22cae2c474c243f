"""An OTLP/HTTP logs body (``ExportLogsServiceRequest``) as records: protobuf or JSON.

Both encodings are read with the ``opentelemetry-proto`` messages: protobuf with
``FromString``, JSON record by record with protobuf's ``json_format`` (OTLP/JSON writes trace and
span ids as hex where proto3 JSON expects base64, so those two fields, which nothing here reads,
are dropped before parsing). Reading JSON record by record means one record of a wrong shape is
reported alone (``Unreadable``) while the rest of the batch is kept; a protobuf body is one
message, so it either decodes whole or is one ``Unreadable``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from mcptax.tokens import canonical

JSON = "json"
PROTOBUF = "protobuf"
# Hex ids in OTLP/JSON; proto3 JSON would read them as base64 and refuse most of them.
_HEX_ID_FIELDS = ("traceId", "spanId", "trace_id", "span_id")


@dataclass
class OtelRecord:
    """One log record with its resource's attributes, values as plain Python."""

    index: int  # 1-based position in the batch, across every resource and scope
    event: str  # "claude_code.tool_result", "codex.tool_result", ... ("" when none is given)
    attributes: dict[str, Any]
    resource: dict[str, Any]
    time_unix_nano: int
    body: Any
    scope: str = ""
    _message: LogRecord | None = field(default=None, repr=False)

    def raw(self) -> bytes:
        """The record as canonical JSON, with its resource and scope: what a quarantine keeps."""
        record: dict[str, Any] = (
            json_format.MessageToDict(self._message) if self._message is not None else {"body": self.body}
        )
        whole = {"resource": self.resource, "scope": self.scope, "logRecord": record}
        return canonical(whole).encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class Unreadable:
    """A part of the body that is not a log record we can read, and why."""

    index: int
    reason: str
    raw: bytes


def any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


def attributes_of(pairs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        assert isinstance(pair, KeyValue)
        out[pair.key] = any_value(pair.value)
    return out


def _event_name(record: LogRecord, attributes: dict[str, Any], body: Any, service: str) -> str:
    """The record's event: the ``event_name`` field, else a namespaced ``event.name`` attribute
    (Codex), else a namespaced body (Claude Code writes the event there and a bare ``event.name``)."""
    if record.event_name:
        return record.event_name
    name = attributes.get("event.name")
    if isinstance(name, str) and "." in name:
        return name
    if isinstance(body, str) and body.startswith(("claude_code.", "codex.")):
        return body
    if isinstance(name, str) and name:
        if "claude" in service.lower():
            return f"claude_code.{name}"
        if "codex" in service.lower():
            return f"codex.{name}"
        return name
    return body if isinstance(body, str) else ""


def _record(index: int, message: LogRecord, resource: dict[str, Any], scope: str) -> OtelRecord:
    attributes = attributes_of(message.attributes)
    body = any_value(message.body) if message.HasField("body") else None
    service = str(resource.get("service.name") or "")
    return OtelRecord(
        index=index,
        event=_event_name(message, attributes, body, service),
        attributes=attributes,
        resource=resource,
        time_unix_nano=message.time_unix_nano or message.observed_time_unix_nano,
        body=body,
        scope=scope,
        _message=message,
    )


def encoding_of(data: bytes) -> str:
    """JSON when the body starts with ``{`` (after whitespace); protobuf otherwise (an encoded
    ExportLogsServiceRequest starts with its first field's tag, never ``{``)."""
    return JSON if data.lstrip()[:1] == b"{" else PROTOBUF


def decode_body(data: bytes) -> list[OtelRecord | Unreadable]:
    """Every log record of the body, in order; an unreadable body or record is an Unreadable."""
    if encoding_of(data) == PROTOBUF:
        return list(_from_protobuf(data))
    return list(_from_json(data))


def _from_protobuf(data: bytes) -> Iterator[OtelRecord | Unreadable]:
    try:
        request = ExportLogsServiceRequest.FromString(data)
    except (DecodeError, RecursionError, ValueError):
        yield Unreadable(1, "invalid_protobuf", data)
        return
    index = 0
    for resource_logs in request.resource_logs:
        resource = attributes_of(resource_logs.resource.attributes)
        for scope_logs in resource_logs.scope_logs:
            for message in scope_logs.log_records:
                index += 1
                yield _record(index, message, resource, scope_logs.scope.name)


def _strip_hex_ids(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in _HEX_ID_FIELDS}


def _from_json(data: bytes) -> Iterator[OtelRecord | Unreadable]:
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        yield Unreadable(1, "invalid_json", data)
        return
    groups = (
        document.get("resourceLogs", document.get("resource_logs")) if isinstance(document, dict) else None
    )
    if not isinstance(groups, list):
        yield Unreadable(1, "not_otlp_logs", data)
        return
    index = 0
    for group in groups:
        resource = _json_resource(group)
        scopes = group.get("scopeLogs", group.get("scope_logs")) if isinstance(group, dict) else None
        for scope_logs in scopes if isinstance(scopes, list) else []:
            scope = scope_logs.get("scope") if isinstance(scope_logs, dict) else None
            scope_name = str(scope.get("name", "")) if isinstance(scope, dict) else ""
            records = (
                scope_logs.get("logRecords", scope_logs.get("log_records"))
                if isinstance(scope_logs, dict)
                else None
            )
            for item in records if isinstance(records, list) else []:
                index += 1
                yield _json_record(index, item, resource, scope_name)


def _json_resource(group: Any) -> dict[str, Any]:
    resource = group.get("resource") if isinstance(group, dict) else None
    if not isinstance(resource, dict):
        return {}
    message = Resource()
    try:
        json_format.ParseDict(resource, message, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, RecursionError):
        return {}
    return attributes_of(message.attributes)


def _json_record(index: int, item: Any, resource: dict[str, Any], scope: str) -> OtelRecord | Unreadable:
    raw = canonical({"resource": resource, "scope": scope, "logRecord": item}).encode(
        "utf-8", "surrogatepass"
    )
    problem = _json_record_problem(item)
    if problem is not None:
        return Unreadable(index, problem, raw)
    message = LogRecord()
    try:
        json_format.ParseDict(_strip_hex_ids(item), message, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        return Unreadable(index, f"invalid_log_record: {str(exc)[:150]}", raw)
    return _record(index, message, resource, scope)


def _json_record_problem(item: Any) -> str | None:
    """Why a JSON log record cannot be read, judged on its shape alone (cheap; ``decode_body``
    still parses every field)."""
    if not isinstance(item, dict):
        return "not_a_log_record"
    if not isinstance(item.get("attributes", []), list):
        return "invalid_log_record"
    if not isinstance(item.get("body", {}), dict):
        return "invalid_log_record"
    return None


def check_body(data: bytes) -> tuple[int, int, str]:
    """(records, unreadable, reasons) of a body, without mapping anything: what the receiver
    answers with (partial success, or 400 when nothing in it is a log record)."""
    if encoding_of(data) == PROTOBUF:
        try:
            request = ExportLogsServiceRequest.FromString(data)
        except (DecodeError, RecursionError, ValueError):
            return 1, 1, "invalid_protobuf"
        count = sum(len(s.log_records) for r in request.resource_logs for s in r.scope_logs)
        return count, 0, ""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return 1, 1, "invalid_json"
    groups = (
        document.get("resourceLogs", document.get("resource_logs")) if isinstance(document, dict) else None
    )
    if not isinstance(groups, list):
        return 1, 1, "not_otlp_logs"
    records, problems = 0, set()
    bad = 0
    for group in groups:
        scopes = group.get("scopeLogs", group.get("scope_logs")) if isinstance(group, dict) else None
        for scope_logs in scopes if isinstance(scopes, list) else []:
            items = (
                scope_logs.get("logRecords", scope_logs.get("log_records"))
                if isinstance(scope_logs, dict)
                else None
            )
            for item in items if isinstance(items, list) else []:
                records += 1
                problem = _json_record_problem(item)
                if problem is not None:
                    bad += 1
                    problems.add(problem)
    return records, bad, ", ".join(sorted(problems))
