"""What each telemetry record is, in Claude Code's and Codex's own attribute names.

The shapes are those of the clients' public documentation and source (cited in
``tests/data/otel/README.md``):

- ``claude_code.tool_result``: ``tool_name`` (``mcp__<server>__<tool>`` for an MCP tool, or the
  placeholder ``mcp_tool`` without ``OTEL_LOG_TOOL_DETAILS=1``), ``tool_use_id``, ``success``,
  ``duration_ms``, ``error``/``error_type``; with tool details ``tool_parameters`` (a JSON string
  with ``mcp_server_name`` and ``mcp_tool_name``) and ``tool_input`` (the arguments as a JSON
  string, each value over 512 characters cut and the whole near 4 K characters).
- ``codex.tool_result``: ``tool_name``, ``call_id``, ``arguments`` (the raw JSON string),
  ``duration_ms``, ``success``, ``output``, ``mcp_server`` (empty for a built-in tool) and
  ``mcp_server_origin``.
- ``claude_code.api_request``: ``model``, ``input_tokens``, ``output_tokens``,
  ``cache_read_tokens``, ``cache_creation_tokens``, ``cost_usd``, ``duration_ms``, ``request_id``;
  Codex reports a request's usage on ``codex.sse_event`` of ``event.kind`` ``response.completed``
  (``input_token_count``, ``cached_token_count``, ``output_token_count``).
- ``claude_code.api_request_body``: ``body`` (the Messages API request as JSON, cut when
  ``body_truncated`` is ``"true"``) or ``body_ref`` (kept on the client's disk).
- Common: ``session.id`` (Codex: ``conversation.id``), ``event.timestamp``, ``event.sequence``
  (Claude Code), ``prompt.id``, ``app.version``, ``user.account_uuid``, ``organization.id``,
  ``terminal.type``.

The record key (``record_key``) is how an exporter's retry of the same record is recognised: a
sha256 over the client, the session, the event, ``event.sequence`` (Claude Code numbers a
session's events) or else the record's ``event.timestamp`` / time, and the tool call's own id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mcptax.formats.claude_code import split_tool_name
from mcptax.formats.records import AgentInfo, normalize_agent_family, sha256_hex, utf8
from mcptax.otel.decode import OtelRecord
from mcptax.tokens import canonical

CLAUDE = "claude_code"
CODEX = "codex"
# Claude Code's stand-in name for an MCP tool when tool details are off.
MCP_PLACEHOLDER = "mcp_tool"
# Claude Code cuts each tool_input value past this many characters: a value this long may be cut.
TOOL_INPUT_VALUE_LIMIT = 512
SEARCH_TOOLS = frozenset({"ToolSearch", "tool_search", "tool_search_tool_regex", "tool_search_tool_bm25"})
# Events understood but not turned into figures, each ignored under its own reason.
_KNOWN_UNUSED = frozenset(
    {
        "user_prompt",
        "tool_decision",
        "api_error",
        "api_refusal",
        "api_response_body",
        "api_retries_exhausted",
        "assistant_response",
        "permission_mode_changed",
        "auth",
        "mcp_server_connection",
        "internal_error",
        "plugin_installed",
        "plugin_loaded",
        "skill_activated",
        "at_mention",
        "hook_registered",
        "hook_execution_start",
        "hook_execution_complete",
        "conversation_starts",
        "api_request",  # Codex's api_request carries no token counts (its sse_event does)
        "sse_event",
        "websocket_request",
        "websocket_event",
        "startup_phase",
        "turn_ttft",
    }
)


@dataclass(frozen=True)
class Context:
    """What every record of a session says about where it comes from."""

    client: str  # CLAUDE | CODEX
    session: str
    agent: AgentInfo
    at: str | None  # RFC 3339
    key: str


@dataclass(frozen=True)
class ToolResult:
    context: Context
    server: str
    tool: str
    call_id: str | None
    success: bool | None
    duration_ms: float | None
    error: str | None
    arguments: dict[str, Any] | None  # None: no content in telemetry
    arguments_raw: str | None  # Codex's raw string, its exact bytes
    truncated_pointers: tuple[str, ...]
    output: str | None


@dataclass(frozen=True)
class ApiRequest:
    context: Context
    model: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_creation_tokens: int
    cost_usd: float | None
    duration_ms: float | None
    request_id: str


@dataclass(frozen=True)
class RequestBody:
    context: Context
    model: str
    body: dict[str, Any]
    request_id: str


@dataclass(frozen=True)
class ToolSearchRecord:
    context: Context
    call_id: str
    query: str
    search_tool: str


@dataclass(frozen=True)
class Ignored:
    reason: str


@dataclass(frozen=True)
class Quarantined:
    reason: str


Classified = ToolResult | ApiRequest | RequestBody | ToolSearchRecord | Ignored | Quarantined


def _str(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _count(value: Any) -> int:
    number = _number(value)
    return int(number) if number is not None and number >= 0 else 0


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def _at(record: OtelRecord) -> str | None:
    stamp = _str(record.attributes.get("event.timestamp"))
    if stamp is not None:
        return stamp
    if record.time_unix_nano:
        return datetime.fromtimestamp(record.time_unix_nano / 1e9, UTC).isoformat().replace("+00:00", "Z")
    return None


def record_key(client: str, session: str, event: str, record: OtelRecord) -> str:
    """The key of a record, stable across an exporter's retries (see the module docstring)."""
    attributes = record.attributes
    sequence = _str(attributes.get("event.sequence"))
    when = sequence or _str(attributes.get("event.timestamp")) or str(record.time_unix_nano)
    call = _str(attributes.get("tool_use_id")) or _str(attributes.get("call_id")) or ""
    kind = _str(attributes.get("event.kind")) or ""
    return sha256_hex(utf8(canonical(["otel", client, session, event, when, call, kind])))


def _context(client: str, event: str, record: OtelRecord) -> Context | Quarantined:
    attributes, resource = record.attributes, record.resource
    session_attr = "session.id" if client == CLAUDE else "conversation.id"
    session = _str(attributes.get(session_attr)) or _str(resource.get(session_attr))
    if session is None:
        return Quarantined(f"missing_attribute:{session_attr}")
    version = _str(attributes.get("app.version")) or _str(resource.get("service.version"))
    if client == CLAUDE:
        agent = AgentInfo("claude-code", "claude-code", version, "Claude Code", source="telemetry")
    else:
        name = _str(resource.get("service.name")) or "codex"
        agent = AgentInfo(normalize_agent_family(name), name, version, None, source="telemetry")
    return Context(client, session, agent, _at(record), record_key(client, session, event, record))


def classify(record: OtelRecord) -> Classified:
    """What ``record`` is; never raises."""
    client, _, name = record.event.partition(".")
    if client not in (CLAUDE, CODEX) or not name:
        return Quarantined(f"unknown_event:{record.event[:80]}" if record.event else "no_event_name")
    context = _context(client, record.event, record)
    if isinstance(context, Quarantined):
        return context
    if name == "tool_result":
        return _tool_result(context, record.attributes)
    if client == CLAUDE and name == "api_request":
        return _api_request(context, record.attributes)
    if (
        client == CODEX
        and name == "sse_event"
        and record.attributes.get("event.kind") == "response.completed"
    ):
        return _codex_usage(context, record.attributes)
    if client == CLAUDE and name == "api_request_body":
        return _request_body(context, record.attributes)
    if name in _KNOWN_UNUSED:
        return Ignored(f"otel_{name}")
    return Quarantined(f"unknown_event:{record.event[:80]}")


def _json_object(text: Any) -> dict[str, Any] | None:
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _long_values(value: Any, pointer: str = "") -> list[str]:
    """Pointers of the strings that may have been cut at TOOL_INPUT_VALUE_LIMIT characters."""
    if isinstance(value, str):
        return [pointer] if len(value) >= TOOL_INPUT_VALUE_LIMIT else []
    if isinstance(value, dict):
        items: list[tuple[str, Any]] = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list):
        items = [(str(i), v) for i, v in enumerate(value)]
    else:
        return []
    found: list[str] = []
    for key, child in items:
        found += _long_values(child, f"{pointer}/{key.replace('~', '~0').replace('/', '~1')}")
    return found


def _tool_result(context: Context, attributes: dict[str, Any]) -> Classified:
    tool_name = _str(attributes.get("tool_name"))
    if tool_name is None:
        return Quarantined("missing_attribute:tool_name")
    if context.client == CODEX:
        return _codex_tool_result(context, attributes, tool_name)
    parameters = _json_object(attributes.get("tool_parameters")) or {}
    server = _str(parameters.get("mcp_server_name"))
    tool = _str(parameters.get("mcp_tool_name"))
    split = split_tool_name(tool_name)
    if split is not None:
        server, tool = server or split[0], tool or split[1]
    if tool_name in SEARCH_TOOLS:
        query = _json_object(attributes.get("tool_input")) or {}
        call_id = _str(attributes.get("tool_use_id")) or context.key
        return ToolSearchRecord(context, call_id, str(query.get("query") or ""), tool_name)
    if split is None and tool_name != MCP_PLACEHOLDER and server is None:
        return Ignored("builtin_tool")
    arguments = _json_object(attributes.get("tool_input")) if "tool_input" in attributes else None
    return ToolResult(
        context=context,
        server=server or "",
        tool=tool or tool_name,
        call_id=_str(attributes.get("tool_use_id")),
        success=_flag(attributes.get("success")),
        duration_ms=_number(attributes.get("duration_ms")),
        error=_str(attributes.get("error")) or _str(attributes.get("error_type")),
        arguments=arguments,
        arguments_raw=None,
        truncated_pointers=tuple(_long_values(arguments)) if arguments is not None else (),
        output=None,
    )


def _codex_tool_result(context: Context, attributes: dict[str, Any], tool_name: str) -> Classified:
    server = _str(attributes.get("mcp_server"))
    split = split_tool_name(tool_name)
    if tool_name in SEARCH_TOOLS and server is None:
        query = _json_object(attributes.get("arguments")) or {}
        call_id = _str(attributes.get("call_id")) or context.key
        return ToolSearchRecord(context, call_id, str(query.get("query") or ""), tool_name)
    if server is None and split is None:
        return Ignored("builtin_tool")
    tool = tool_name
    if split is not None:
        server, tool = server or split[0], split[1]
    raw = attributes.get("arguments")
    arguments = _json_object(raw)
    if isinstance(raw, str) and raw and arguments is None:
        return Quarantined("invalid_arguments_json")
    return ToolResult(
        context=context,
        server=server or "",
        tool=tool,
        call_id=_str(attributes.get("call_id")),
        success=_flag(attributes.get("success")),
        duration_ms=_number(attributes.get("duration_ms")),
        error=None,
        arguments=arguments,
        arguments_raw=raw if arguments is not None and isinstance(raw, str) else None,
        truncated_pointers=(),
        output=_str(attributes.get("output")),
    )


def _api_request(context: Context, attributes: dict[str, Any]) -> Classified:
    if "input_tokens" not in attributes:
        return Quarantined("missing_attribute:input_tokens")
    return ApiRequest(
        context=context,
        model=_str(attributes.get("model")) or "",
        input_tokens=_count(attributes.get("input_tokens")),
        output_tokens=_count(attributes.get("output_tokens")),
        cache_read_tokens=_count(attributes.get("cache_read_tokens")),
        cache_creation_tokens=_count(attributes.get("cache_creation_tokens")),
        cost_usd=_number(attributes.get("cost_usd")),
        duration_ms=_number(attributes.get("duration_ms")),
        request_id=_str(attributes.get("request_id")) or "",
    )


def _codex_usage(context: Context, attributes: dict[str, Any]) -> Classified:
    if "input_token_count" not in attributes:
        return Quarantined("missing_attribute:input_token_count")
    # OpenAI counts cached input inside input_token_count; the uncached part is the difference.
    total_input = _count(attributes.get("input_token_count"))
    cached = _count(attributes.get("cached_token_count"))
    return ApiRequest(
        context=context,
        model=_str(attributes.get("model")) or "",
        input_tokens=max(total_input - cached, 0),
        output_tokens=_count(attributes.get("output_token_count")),
        cache_read_tokens=cached,
        cache_creation_tokens=0,
        cost_usd=None,
        duration_ms=_number(attributes.get("duration_ms")),
        request_id="",
    )


def _request_body(context: Context, attributes: dict[str, Any]) -> Classified:
    if "body" not in attributes and "body_ref" in attributes:
        return Ignored("request_body_on_client_disk")
    if _flag(attributes.get("body_truncated")):
        return Quarantined("request_body_truncated")
    body = _json_object(attributes.get("body"))
    if body is None:
        return Quarantined("invalid_request_body")
    return RequestBody(
        context, _str(attributes.get("model")) or "", body, _str(attributes.get("request_id")) or ""
    )
