"""OpenTelemetry logs (OTLP/HTTP) from Claude Code and Codex, read without Django.

``decode`` turns an OTLP ``ExportLogsServiceRequest`` body (protobuf or JSON) into one
``OtelRecord`` per log record, or an ``Unreadable`` for a part that cannot be read; ``events``
says what each record is (a tool call, a measured request, the tools a request sent, a tool
search, ignored or quarantined with a reason) and the key a retried record is recognised by;
``sent_tools`` counts the tool definitions of a request body in each encoding.
"""

from mcptax.otel.decode import OtelRecord, Unreadable, decode_body
from mcptax.otel.events import (
    ApiRequest,
    Ignored,
    Quarantined,
    RequestBody,
    ToolResult,
    ToolSearchRecord,
    classify,
)

__all__ = [
    "ApiRequest",
    "Ignored",
    "OtelRecord",
    "Quarantined",
    "RequestBody",
    "ToolResult",
    "ToolSearchRecord",
    "Unreadable",
    "classify",
    "decode_body",
]
