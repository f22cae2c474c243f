"""Codex CLI rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Current shape: ``{"timestamp", "type", "payload"}`` with ``type`` one of ``session_meta``
(``payload.id`` = session, ``cli_version``, ``originator``), ``response_item`` (model items:
``message``, ``reasoning``, ``function_call``, ``function_call_output``, ``custom_tool_call``,
``local_shell_call`` ...), ``event_msg`` (``token_count`` and UI events), ``turn_context``,
``compacted``. Older rollouts (first line ``{"id", "timestamp", "instructions"}``, then bare items
and ``{"record_type": "state"}`` lines) are read too.

- A ``function_call`` whose name contains ``__`` is an MCP call: Codex names MCP tools
  ``<server>__<tool>`` (some builds prefix ``mcp__``); built-in tools (``shell``, ``apply_patch``
  ...) never contain ``__``. Current builds write the bare tool name with
  ``"namespace": "mcp__<server>"``. Its ``arguments`` is the raw JSON string the model produced: it is
  parsed for the call and kept verbatim (``arguments_raw``) for hashing; a string that is not a
  JSON object quarantines the line (``invalid_arguments_json``).
- ``function_call_output`` (matched by ``call_id``) is the response; an output that is a JSON
  ``CallToolResult`` is used as such, any other output becomes one text content block; an
  output starting ``tool call error:`` is an error.
- ``event_msg`` ``mcp_tool_call_end`` (``call_id``, ``invocation {server, tool, arguments}``,
  ``duration {secs, nanos}``, ``result {"Ok": CallToolResult} | {"Err": message}``) is the
  authoritative response of its call (its duration is kept); with no ``function_call`` of the
  same ``call_id`` before it, it forms the call itself (started at its time minus the duration).
- Lines without a timestamp of their own (older rollouts) take the session start.
- ``token_count`` events carry ``info.last_token_usage.output_tokens`` of the model response
  that produced the calls since the previous ``token_count``.
- Agent = ``codex`` (name = ``originator``, version = ``cli_version``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any

from mcptax.formats.records import (
    BUILTIN_TOOL_METHOD,
    DEFAULT_MAX_LINE_BYTES,
    AgentInfo,
    Frame,
    LineEvent,
    RawLine,
    canonical,
    frames_event,
    ignore,
    load_json,
    numbered_lines,
    quarantine,
    read_json_object,
    str_or_none,
    tools_call,
)

FORMAT = "codex"
_BUILTIN_CALL_TYPES = frozenset({"custom_tool_call", "local_shell_call"})
_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
ERROR_OUTPUT_PREFIX = "tool call error:"
_ITEM_TYPES = frozenset(
    {"message", "reasoning", "function_call", "web_search_call"} | _BUILTIN_CALL_TYPES | _OUTPUT_TYPES
)


def split_tool_name(name: str) -> tuple[str, str] | None:
    """``server__tool`` or ``mcp__server__tool`` -> ``(server, tool)``; None for built-ins."""
    rest = name.removeprefix("mcp__")
    server, sep, tool = rest.partition("__")
    if not sep or not server or not tool:
        return None
    return server, tool


def _text_blocks(items: list[Any]) -> list[Any]:
    blocks = []
    for item in items:
        if isinstance(item, dict) and item.get("type") in ("input_text", "output_text"):
            blocks.append({"type": "text", "text": item.get("text", "")})
        elif isinstance(item, dict):
            blocks.append(item)
        else:
            blocks.append({"type": "text", "text": str(item)})
    return blocks


def call_result(output: Any) -> dict[str, Any]:
    """A CallToolResult-shaped dict from a ``function_call_output.output`` of any Codex vintage."""
    success = None
    if isinstance(output, dict):
        success = output.get("success") if isinstance(output.get("success"), bool) else None
        output = output.get("content", "")
    if isinstance(output, str):
        parsed, problem = load_json(output)
        if problem is None and isinstance(parsed, dict) and isinstance(parsed.get("content"), list):
            result = dict(parsed)
        else:
            result = {"content": [{"type": "text", "text": output}]}
            if output.startswith(ERROR_OUTPUT_PREFIX):
                success = False
    elif isinstance(output, list):
        result = {"content": _text_blocks(output)}
    else:
        result = {"content": []}
    if success is not None and "isError" not in result:
        result["isError"] = not success
    return result


def end_result(result: Any) -> dict[str, Any] | None:
    """The CallToolResult of an ``mcp_tool_call_end`` ``result`` (``Ok`` / ``Err``), None if unreadable."""
    if not isinstance(result, dict):
        return None
    if isinstance(result.get("Err"), str):
        return {"content": [{"type": "text", "text": result["Err"]}], "isError": True}
    ok = result.get("Ok")
    if not isinstance(ok, dict):
        return None
    ok = dict(ok)
    if "is_error" in ok and "isError" not in ok:
        ok["isError"] = ok.pop("is_error")
    if not isinstance(ok.get("isError"), bool):
        ok["isError"] = False
    return ok


def _duration_ms(duration: Any) -> float | None:
    if not isinstance(duration, dict):
        return None
    secs, nanos = duration.get("secs"), duration.get("nanos", 0)
    if not (isinstance(secs, int) and isinstance(nanos, int) and _count(secs) and _count(nanos)):
        return None
    return round(secs * 1000 + nanos / 1_000_000, 3)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _started(ts: str | None, duration_ms: float | None) -> str | None:
    """The time ``duration_ms`` before ``ts``, written like the rollout writes times."""
    if ts is None or duration_ms is None:
        return None
    try:
        end = datetime.fromisoformat(ts)
    except ValueError:
        return None
    start = (end - timedelta(milliseconds=duration_ms)).isoformat(timespec="milliseconds")
    return start.replace("+00:00", "Z") if ts.endswith("Z") else start


def _split_record(record: dict[str, Any]) -> tuple[str | None, Any]:
    """(record type, payload) across rollout vintages."""
    kind = record.get("type")
    if isinstance(kind, str) and "payload" in record:
        return kind, record["payload"]
    if "record_type" in record:
        return "state", record
    if kind is None and "id" in record and "timestamp" in record:
        return "session_meta", record
    if isinstance(kind, str) and kind in _ITEM_TYPES:
        return "response_item", record
    return (kind if isinstance(kind, str) else None), record


def _mcp_name(payload: dict[str, Any], name: str) -> tuple[str, str] | None:
    """(server, tool) of an MCP ``function_call``: namespaced (current) or ``server__tool`` (older)."""
    namespace = str_or_none(payload.get("namespace"))
    if namespace is not None and namespace.startswith("mcp__"):
        server = namespace.removeprefix("mcp__").removesuffix("__")
        tool = name.removeprefix(f"{namespace.removesuffix('__')}__")
        return (server, tool) if server and tool else None
    return split_tool_name(name)


def _end_frames(
    payload: dict[str, Any], ts: str | None, formed: bool, common: dict[str, Any]
) -> list[Frame] | None:
    """Frames of an ``mcp_tool_call_end``: its response, preceded by the request when no
    ``function_call`` formed the call; None when the record is unreadable."""
    call_id = str_or_none(payload.get("call_id"))
    invocation = payload.get("invocation")
    result = end_result(payload.get("result"))
    if call_id is None or result is None or not isinstance(invocation, dict):
        return None
    duration = _duration_ms(payload.get("duration"))
    response = {"jsonrpc": "2.0", "id": call_id, "result": result}
    frames = [
        Frame(
            kind="response",
            message=response,
            direction="s2c",
            client_call_id=call_id,
            duration_ms=duration,
            **common,
        )
    ]
    if formed:
        return frames
    server, tool = str_or_none(invocation.get("server")), str_or_none(invocation.get("tool"))
    arguments = invocation.get("arguments")
    arguments = {} if arguments is None else arguments
    if server is None or tool is None or not isinstance(arguments, dict):
        return None
    request = tools_call(call_id, tool, arguments)
    started = {**common, "ts": _started(ts, duration) or common["ts"]}
    frames.insert(
        0,
        Frame(
            kind="request",
            message=request,
            server_label=server,
            client_call_id=call_id,
            arguments_raw=canonical(arguments),
            **started,
        ),
    )
    return frames


_DEFAULT_AGENT = AgentInfo("codex", "codex", None, "Codex CLI", source="transcript")


def parse(
    lines: Iterable[bytes | str],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    state: dict[str, Any] | None = None,
) -> Iterator[LineEvent]:
    """One LineEvent per rollout line (see module docstring).

    ``state``: what the parser knew after the lines read before (a tailed file read on from an
    offset), updated in place once these lines are exhausted.
    """
    saved = state or {}
    session: str | None = saved.get("session")
    session_start: str | None = saved.get("session_start")
    agent = AgentInfo(**saved["agent"]) if saved.get("agent") else _DEFAULT_AGENT
    # Call ids a function_call (or an end record standing alone) formed, and which of them came
    # from an end record: a call is formed once whatever the order of its records.
    formed: set[str] = set(saved.get("formed", ()))
    formed_by_end: set[str] = set(saved.get("formed_by_end", ()))
    for line in numbered_lines(lines):
        record = read_json_object(line, max_line_bytes)
        if isinstance(record, LineEvent):
            yield record
            continue
        kind, payload = _split_record(record)
        if kind is None or not isinstance(payload, dict):
            yield quarantine(line, "unknown_shape")
            continue
        ts = str_or_none(record.get("timestamp")) or str_or_none(payload.get("timestamp"))
        if kind == "session_meta":
            session = str_or_none(payload.get("id")) or session
            session_start = ts or session_start
            agent = AgentInfo(
                "codex",
                str_or_none(payload.get("originator")) or "codex",
                str_or_none(payload.get("cli_version")),
                "Codex CLI",
                source="transcript",
            )
            if session is None:
                yield quarantine(line, "missing_field:session_id")
            else:
                yield frames_event(line, [Frame(kind="session", session_key=session, ts=ts, agent=agent)])
            continue
        ts = ts or session_start
        if kind == "event_msg":
            yield _event(line, payload, session, ts, agent, formed, formed_by_end)
            continue
        if kind == "response_item":
            yield _response_item(line, payload, session, ts, agent, formed, formed_by_end)
        else:
            yield ignore(line, "meta")
    if state is not None:
        state.update(
            session=session,
            session_start=session_start,
            agent=dataclasses.asdict(agent),
            formed=sorted(formed),
            formed_by_end=sorted(formed_by_end),
        )


def _response_item(
    line: RawLine,
    payload: dict[str, Any],
    session: str | None,
    ts: str | None,
    agent: AgentInfo,
    formed: set[str],
    formed_by_end: set[str],
) -> LineEvent:
    """A ``response_item`` line: a call (MCP, built-in or custom tool) or a call's output."""
    item_type = payload.get("type") if isinstance(payload.get("type"), str) else None
    call_id = str_or_none(payload.get("call_id"))
    is_call = item_type == "function_call" or item_type in _BUILTIN_CALL_TYPES
    if not (is_call or item_type in _OUTPUT_TYPES):
        return ignore(line, "not_a_tool_call")
    if call_id is None:
        return quarantine(line, "missing_field:call_id")
    if session is None:
        return quarantine(line, "missing_field:session_id")
    common: dict[str, Any] = {"session_key": session, "ts": ts, "agent": agent, "transport": "transcript"}
    if item_type in _OUTPUT_TYPES:
        response = {"jsonrpc": "2.0", "id": call_id, "result": call_result(payload.get("output"))}
        return frames_event(
            line,
            [Frame(kind="response", message=response, direction="s2c", client_call_id=call_id, **common)],
        )
    if call_id in formed_by_end:
        return ignore(line, "recorded_by_mcp_tool_call_end")
    formed.add(call_id)

    name = str_or_none(payload.get("name")) or str(item_type)
    read = _call_arguments(item_type, payload)
    if read is None:
        return quarantine(line, "invalid_arguments_json")
    arguments, raw_arguments = read
    split = _mcp_name(payload, name) if item_type == "function_call" else None
    server, tool = split if split else ("", name)
    request = tools_call(call_id, tool, arguments, "tools/call" if split else BUILTIN_TOOL_METHOD)
    frame = Frame(
        kind="request",
        message=request,
        server_label=server,
        client_call_id=call_id,
        arguments_raw=raw_arguments if raw_arguments is not None else canonical(arguments),
        **common,
    )
    return frames_event(line, [frame])


def _call_arguments(
    item_type: str | None, payload: dict[str, Any]
) -> tuple[dict[str, Any], str | None] | None:
    """(a call's arguments, the JSON text they were read from if any); None when a function call's
    arguments are not a JSON object."""
    if item_type == "function_call":
        raw = payload.get("arguments")
        if isinstance(raw, str):
            arguments, problem = load_json(raw)
            if problem is not None or not isinstance(arguments, dict):
                return None
            return arguments, raw
        return (raw, None) if isinstance(raw, dict) else None
    if item_type == "custom_tool_call":
        return {"input": payload.get("input")}, None
    return {"action": payload.get("action")}, None


def _event(
    line: RawLine,
    payload: dict[str, Any],
    session: str | None,
    ts: str | None,
    agent: AgentInfo,
    formed: set[str],
    formed_by_end: set[str],
) -> LineEvent:
    kind = payload.get("type")
    if kind == "mcp_tool_call_end" and session is not None:
        common: dict[str, Any] = {"session_key": session, "ts": ts, "agent": agent, "transport": "transcript"}
        call_id = str_or_none(payload.get("call_id")) or ""
        frames = _end_frames(payload, ts, call_id in formed, common)
        if frames is None:
            return quarantine(line, "unknown_shape")
        if call_id not in formed:
            formed.add(call_id)
            formed_by_end.add(call_id)
        return frames_event(line, frames)
    if kind != "token_count":
        return ignore(line, "meta")
    info = payload.get("info")
    last = info.get("last_token_usage") if isinstance(info, dict) else None
    output = last.get("output_tokens") if isinstance(last, dict) else None
    if not isinstance(output, int) or isinstance(output, bool) or output < 0 or session is None:
        return ignore(line, "meta")
    return frames_event(line, [Frame(kind="usage", session_key=session, ts=ts, output_tokens=output)])
