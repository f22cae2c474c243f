"""Codex CLI rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Current shape: ``{"timestamp", "type", "payload"}`` with ``type`` one of ``session_meta``
(``payload.id`` = session, ``cli_version``, ``originator``), ``response_item`` (model items:
``message``, ``reasoning``, ``function_call``, ``function_call_output``, ``custom_tool_call``,
``local_shell_call`` ...), ``event_msg`` (``token_count`` and UI events), ``turn_context``,
``compacted``. Older rollouts (first line ``{"id", "timestamp", "instructions"}``, then bare items
and ``{"record_type": "state"}`` lines) are read too.

- A ``function_call`` whose name contains ``__`` is an MCP call: Codex names MCP tools
  ``<server>__<tool>`` (some builds prefix ``mcp__``); built-in tools (``shell``, ``apply_patch``
  ...) never contain ``__``. Its ``arguments`` is the raw JSON string the model produced: it is
  parsed for the call and kept verbatim (``arguments_raw``) for hashing; a string that is not a
  JSON object quarantines the line (``invalid_arguments_json``).
- ``function_call_output`` (matched by ``call_id``) is the response; an output that is a JSON
  ``CallToolResult`` is used as such, any other output becomes one text content block.
- ``token_count`` events carry ``info.last_token_usage.output_tokens`` of the model response
  that produced the calls since the previous ``token_count``.
- Agent = ``codex`` (name = ``originator``, version = ``cli_version``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from mcptax.formats.records import (
    BUILTIN_TOOL_METHOD,
    DEFAULT_MAX_LINE_BYTES,
    AgentInfo,
    Frame,
    LineEvent,
    canonical,
    frames_event,
    ignore,
    load_json,
    numbered_lines,
    quarantine,
    read_json_object,
    str_or_none,
)

FORMAT = "codex"
_BUILTIN_CALL_TYPES = frozenset({"custom_tool_call", "local_shell_call"})
_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
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
    elif isinstance(output, list):
        result = {"content": _text_blocks(output)}
    else:
        result = {"content": []}
    if success is not None and "isError" not in result:
        result["isError"] = not success
    return result


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


def parse(
    lines: Iterable[bytes | str], *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[LineEvent]:
    """One LineEvent per rollout line (see module docstring)."""
    session: str | None = None
    agent = AgentInfo("codex", "codex", None, "Codex CLI", source="transcript")
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
        if kind == "event_msg":
            if payload.get("type") != "token_count":
                yield ignore(line, "meta")
                continue
            info = payload.get("info")
            last = info.get("last_token_usage") if isinstance(info, dict) else None
            output = last.get("output_tokens") if isinstance(last, dict) else None
            if not isinstance(output, int) or isinstance(output, bool) or output < 0 or session is None:
                yield ignore(line, "meta")
                continue
            yield frames_event(line, [Frame(kind="usage", session_key=session, ts=ts, output_tokens=output)])
            continue
        if kind != "response_item":
            yield ignore(line, "meta")
            continue

        item_type = payload.get("type") if isinstance(payload.get("type"), str) else None
        call_id = str_or_none(payload.get("call_id"))
        is_call = item_type == "function_call" or item_type in _BUILTIN_CALL_TYPES
        if not (is_call or item_type in _OUTPUT_TYPES):
            yield ignore(line, "not_a_tool_call")
            continue
        if call_id is None:
            yield quarantine(line, "missing_field:call_id")
            continue
        if session is None:
            yield quarantine(line, "missing_field:session_id")
            continue
        common: dict[str, Any] = {"session_key": session, "ts": ts, "agent": agent, "transport": "transcript"}
        if item_type in _OUTPUT_TYPES:
            response = {"jsonrpc": "2.0", "id": call_id, "result": call_result(payload.get("output"))}
            yield frames_event(
                line,
                [Frame(kind="response", message=response, direction="s2c", client_call_id=call_id, **common)],
            )
            continue

        name = str_or_none(payload.get("name")) or str(item_type)
        raw_arguments: str | None = None
        if item_type == "function_call":
            raw = payload.get("arguments")
            if isinstance(raw, str):
                arguments, problem = load_json(raw)
                raw_arguments = raw
            else:
                arguments, problem = raw, None
            if problem is not None or not isinstance(arguments, dict):
                yield quarantine(line, "invalid_arguments_json")
                continue
        elif item_type == "custom_tool_call":
            arguments = {"input": payload.get("input")}
        else:
            arguments = {"action": payload.get("action")}
        split = split_tool_name(name) if item_type == "function_call" else None
        server, tool = split if split else ("", name)
        request = {
            "jsonrpc": "2.0",
            "id": call_id,
            "method": "tools/call" if split else BUILTIN_TOOL_METHOD,
            "params": {"name": tool, "arguments": arguments},
        }
        frame = Frame(
            kind="request",
            message=request,
            server_label=server,
            client_call_id=call_id,
            arguments_raw=raw_arguments if raw_arguments is not None else canonical(arguments),
            **common,
        )
        yield frames_event(line, [frame])
