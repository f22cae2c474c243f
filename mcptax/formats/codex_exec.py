"""`codex exec --json` event streams (what a CI job or a script captures from Codex's stdout).

One JSON object per line, each a thread event with a ``type``: ``thread.started`` (``thread_id``,
the session), ``turn.started``, ``turn.completed`` (``usage.output_tokens`` of the turn),
``turn.failed``, ``error``, and ``item.started`` / ``item.updated`` / ``item.completed`` carrying
an ``item`` (``id``, ``type``, ...). An item of type ``mcp_tool_call`` is an MCP call: ``server``,
``tool``, ``arguments`` (an object, or null), then on completion ``result`` (``content``,
``structured_content``) or ``error`` (``message``), and ``status`` ``in_progress`` | ``completed``
| ``failed``. Older builds named the item's kind ``item_type``.

- The first event of an item (usually ``item.started``) forms the call; an item seen only at
  ``item.completed`` forms it and answers it on the same line. ``item.updated`` adds nothing.
- ``item.completed`` is the response: ``result`` becomes a CallToolResult (``structured_content``
  as ``structuredContent``), an ``error`` (or status ``failed``) an ``isError: true`` result whose
  text is the message.
- The stream has no timestamps: calls carry none (their order is the file's).
- ``turn.completed`` usage is the output tokens of the turn that made the calls since the
  previous one, as with Codex rollouts.
- Agent = ``codex`` (the stream does not say which version).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from mcptax.formats.records import (
    DEFAULT_MAX_LINE_BYTES,
    AgentInfo,
    Frame,
    LineEvent,
    RawLine,
    canonical,
    frames_event,
    ignore,
    numbered_lines,
    quarantine,
    read_json_object,
    str_or_none,
    tools_call,
)

FORMAT = "codex-exec"
EVENT_TYPES = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
        "error",
    }
)
_AGENT = AgentInfo("codex", "codex_exec", None, "Codex CLI (exec)", source="transcript")


def completed_result(item: dict[str, Any]) -> dict[str, Any]:
    """The CallToolResult of a completed ``mcp_tool_call`` item."""
    error = item.get("error")
    if isinstance(error, dict) or item.get("status") == "failed":
        message = error.get("message") if isinstance(error, dict) else None
        text = message if isinstance(message, str) else "the tool call failed"
        return {"content": [{"type": "text", "text": text}], "isError": True}
    result = item.get("result")
    if not isinstance(result, dict):
        return {"content": [], "isError": False}
    out: dict[str, Any] = {
        "content": result.get("content") if isinstance(result.get("content"), list) else []
    }
    if result.get("structured_content") is not None:
        out["structuredContent"] = result["structured_content"]
    out["isError"] = bool(result.get("is_error") or result.get("isError"))
    return out


def parse(
    lines: Iterable[bytes | str],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    state: dict[str, Any] | None = None,
) -> Iterator[LineEvent]:
    """One LineEvent per event line (see module docstring); ``state`` as for Codex rollouts."""
    saved = state or {}
    session: str | None = saved.get("session")
    formed: set[str] = set(saved.get("formed", ()))
    for line in numbered_lines(lines):
        record = read_json_object(line, max_line_bytes)
        if isinstance(record, LineEvent):
            yield record
            continue
        kind = record.get("type")
        if kind == "thread.started":
            session = str_or_none(record.get("thread_id"))
            if session is None:
                yield quarantine(line, "missing_field:thread_id")
            else:
                yield frames_event(line, [Frame(kind="session", session_key=session, agent=_AGENT)])
        elif kind == "turn.completed":
            yield _usage(line, record, session)
        elif isinstance(kind, str) and kind.startswith("item."):
            yield _item(line, kind, record.get("item"), session, formed)
        elif kind in EVENT_TYPES:
            yield ignore(line, "meta")
        else:
            yield quarantine(line, "unknown_shape")
    if state is not None:
        state.update(session=session, formed=sorted(formed))


def _usage(line: RawLine, record: dict[str, Any], session: str | None) -> LineEvent:
    usage = record.get("usage")
    output = usage.get("output_tokens") if isinstance(usage, dict) else None
    if session is None or not isinstance(output, int) or isinstance(output, bool) or output < 0:
        return ignore(line, "meta")
    return frames_event(line, [Frame(kind="usage", session_key=session, output_tokens=output)])


def _item(line: RawLine, kind: str, item: Any, session: str | None, formed: set[str]) -> LineEvent:
    if not isinstance(item, dict):
        return quarantine(line, "unknown_shape")
    if (item.get("type") or item.get("item_type")) != "mcp_tool_call":
        return ignore(line, "not_a_tool_call")
    item_id = str_or_none(item.get("id"))
    server, tool = str_or_none(item.get("server")), str_or_none(item.get("tool"))
    if item_id is None or server is None or tool is None:
        return quarantine(line, "unknown_shape")
    if session is None:
        return quarantine(line, "missing_field:session_id")
    arguments = item.get("arguments")
    arguments = {} if arguments is None else arguments
    if not isinstance(arguments, dict):
        return quarantine(line, "invalid_arguments_json")
    common: dict[str, Any] = {"session_key": session, "agent": _AGENT, "transport": "transcript"}
    frames: list[Frame] = []
    if item_id not in formed:
        formed.add(item_id)
        request = tools_call(item_id, tool, arguments)
        frames.append(
            Frame(
                kind="request",
                message=request,
                server_label=server,
                client_call_id=item_id,
                arguments_raw=canonical(arguments),
                **common,
            )
        )
    if kind == "item.completed":
        response = {"jsonrpc": "2.0", "id": item_id, "result": completed_result(item)}
        frames.append(
            Frame(kind="response", message=response, direction="s2c", client_call_id=item_id, **common)
        )
    if not frames:
        return ignore(line, "not_a_tool_call")
    return frames_event(line, frames)
