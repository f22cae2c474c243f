"""Cline and Roo Code task histories (``tasks/<task id>/ui_messages.json`` and
``api_conversation_history.json`` under the extension's global storage).

Both are one JSON array, so, as with HAR, a "line" is an element: element ``i`` is line ``i + 1``.

``ui_messages.json`` (what the chat panel shows): ``{ts, type: "ask" | "say", ask | say, text,
partial}`` with ``ts`` in milliseconds since the epoch.

- An MCP call is an ``ask`` (or, when auto-approved, a ``say``) ``use_mcp_server`` whose ``text``
  is JSON ``{type: "use_mcp_tool", serverName, toolName, arguments}``, ``arguments`` being the JSON
  text the model wrote (kept as written and hashed as written). A ``partial`` copy (written while
  the model streams) is ignored; ``type: "access_mcp_resource"`` is a resource read, not a call.
- Its response is the next ``say: "mcp_server_response"`` (text; a tool result with ``isError``
  is written ``Error:\\n...``), or a ``say: "error"`` starting ``Error executing MCP tool`` (the
  call threw: a server not connected, a timeout). A call the user denied has no response.
- Session = ``cline:<ts of the first message>`` (the task's start); agent family ``cline``.

``api_conversation_history.json`` (what the model was sent): Anthropic-style messages. A
``<use_mcp_tool>`` block in an assistant text (``<server_name>``, ``<tool_name>``,
``<arguments>``), or a ``tool_use`` block named ``use_mcp_tool`` (native tool calls), is the call;
the next user message's ``[use_mcp_tool for '<server>'] Result:`` text (or ``tool_result``) is its
response. It has no timestamps; read it when ``ui_messages.json`` is gone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from mcptax.formats.records import (
    DEFAULT_MAX_LINE_BYTES,
    IGNORED,
    QUARANTINED,
    AgentInfo,
    Frame,
    LineEvent,
    canonical,
    load_json,
    sha256_hex,
    str_or_none,
    tools_call,
    utf8,
)

FORMAT = "cline"
DEFAULT_MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
ERROR_PREFIXES = ("Error executing MCP tool", "Error executing use_mcp_tool")
_AGENT = AgentInfo("cline", "cline", None, "Cline / Roo Code", source="transcript")
_TAG = {
    name: re.compile(rf"<{name}>\s*(.*?)\s*</{name}>", re.S)
    for name in ("server_name", "tool_name", "arguments")
}
_MCP_BLOCK = re.compile(r"<use_mcp_tool>(.*?)</use_mcp_tool>", re.S)
_RESULT = re.compile(r"^\[use_mcp_tool for '([^']*)'\] Result:\s*", re.S)


def parse(
    lines: Iterable[bytes | str],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
) -> Iterator[LineEvent]:
    """One LineEvent per element of the history (see module docstring)."""
    data = b"".join(c if isinstance(c, bytes) else c.encode("utf-8", "surrogatepass") for c in lines)
    if not data.strip():
        return
    if len(data) > max_document_bytes:
        yield LineEvent(1, QUARANTINED, "oversize_document", raw=data[:0], length=len(data))
        return
    document, problem = load_json(data)
    if problem is not None or not isinstance(document, list):
        yield LineEvent(1, QUARANTINED, problem or "unknown_shape", raw=data, length=len(data))
        return
    if any(isinstance(m, dict) and "role" in m for m in document[:5]):
        yield from _api_history(document)
    else:
        yield from _ui_messages(document)


def _iso(ms: Any) -> str | None:
    if not isinstance(ms, int | float) or isinstance(ms, bool) or not 0 < ms < 1e14:
        return None
    stamp = datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def _event(
    index: int, frames: list[Frame] | None = None, *, ignored: str = "", bad: str = "", raw: Any = None
) -> LineEvent:
    if bad:
        # Kept whole for inspection, as the JSONL formats keep a quarantined line.
        return LineEvent(index, QUARANTINED, bad, raw=utf8(canonical(raw)))
    if ignored:
        return LineEvent(index, IGNORED, ignored)
    return LineEvent(index, "frame", frames=frames or [])


def _request(session: str, call_id: str, server: str, tool: str, raw: str, ts: str | None) -> Frame | None:
    arguments, problem = load_json(raw) if raw.strip() else ({}, None)
    if problem is not None or not isinstance(arguments, dict):
        return None
    message = tools_call(call_id, tool, arguments)
    return Frame(
        kind="request",
        session_key=session,
        message=message,
        ts=ts,
        server_label=server,
        client_call_id=call_id,
        arguments_raw=raw if raw.strip() else "{}",
        transport="transcript",
        agent=_AGENT,
    )


def _response(session: str, call_id: str, text: str, is_error: bool, ts: str | None) -> Frame:
    result = {"content": [{"type": "text", "text": text}], "isError": is_error}
    message = {"jsonrpc": "2.0", "id": call_id, "result": result}
    return Frame(
        kind="response",
        session_key=session,
        message=message,
        direction="s2c",
        ts=ts,
        client_call_id=call_id,
        transport="transcript",
        agent=_AGENT,
    )


def _ui_messages(messages: list[Any]) -> Iterator[LineEvent]:
    first = next((m.get("ts") for m in messages if isinstance(m, dict) and m.get("ts") is not None), None)
    session = f"cline:{first}"
    open_call: str | None = None
    for index, message in enumerate(messages, start=1):
        if not isinstance(message, dict):
            yield _event(index, bad="unknown_shape", raw=message)
            continue
        kind = message.get("ask") if message.get("type") == "ask" else message.get("say")
        ts, text = _iso(message.get("ts")), message.get("text")
        text = text if isinstance(text, str) else ""
        if kind == "use_mcp_server":
            if message.get("partial") is True:
                yield _event(index, ignored="partial")
                continue
            event, open_call = _use_mcp_server(index, session, text, ts, message.get("ts"))
            if event.status == QUARANTINED:
                event.raw = utf8(canonical(message))
            yield event
        elif kind == "mcp_server_response" and open_call is not None:
            is_error = text.startswith("Error:\n")
            yield _event(index, [_response(session, open_call, text, is_error, ts)])
            open_call = None
        elif kind == "error" and open_call is not None and text.startswith(ERROR_PREFIXES):
            yield _event(index, [_response(session, open_call, text, True, ts)])
            open_call = None
        elif index == 1:  # the task's opening message: the session starts here
            yield _event(index, [Frame(kind="session", session_key=session, ts=ts, agent=_AGENT)])
        else:
            yield _event(index, ignored="not_a_tool_call")


def _use_mcp_server(
    index: int, session: str, text: str, ts: str | None, raw_ts: Any
) -> tuple[LineEvent, str | None]:
    """The event of a ``use_mcp_server`` message, and the id of the call it opened (if any)."""
    request, problem = load_json(text)
    if problem is not None or not isinstance(request, dict):
        return _event(index, bad="unknown_shape"), None
    if request.get("type") != "use_mcp_tool":
        return _event(index, ignored="not_a_tool_call"), None
    server, tool = str_or_none(request.get("serverName")), str_or_none(request.get("toolName"))
    raw = request.get("arguments")
    raw = raw if isinstance(raw, str) else "{}" if raw is None else None
    if server is None or tool is None or raw is None:
        return _event(index, bad="unknown_shape"), None
    call_id = f"{raw_ts}#{index}"
    frame = _request(session, call_id, server, tool, raw, ts)
    if frame is None:
        return _event(index, bad="invalid_arguments_json"), None
    return _event(index, [frame]), call_id


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            _text_of(b.get("text") if b.get("type") == "text" else b.get("content"))
            for b in content
            if isinstance(b, dict)
        )
    return ""


def _api_history(messages: list[Any]) -> Iterator[LineEvent]:
    # No task id or time inside: the task is named by its opening message, which never changes.
    session = "cline-api:" + sha256_hex(utf8(canonical(messages[0])))[:16]
    waiting: list[str] = []
    for index, message in enumerate(messages, start=1):
        if not isinstance(message, dict):
            yield _event(index, bad="unknown_shape", raw=message)
            continue
        if message.get("role") == "assistant":
            frames = [f for f in _assistant_calls(message, session, index) if f is not None]
            waiting = [f.client_call_id or "" for f in frames]
            yield _event(index, frames) if frames else _event(index, ignored="not_a_tool_call")
            continue
        text = _text_of(message.get("content"))
        if waiting and _RESULT.match(text):
            body = _RESULT.sub("", text, count=1)
            yield _event(
                index, [_response(session, waiting.pop(0), body, body.startswith(ERROR_PREFIXES), None)]
            )
        else:
            yield _event(index, ignored="not_a_tool_call")


def _assistant_calls(message: dict[str, Any], session: str, index: int) -> list[Frame | None]:
    frames: list[Frame | None] = []
    content = message.get("content")
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_use" and block.get("name") == "use_mcp_tool":
            given: dict[str, Any] = block["input"] if isinstance(block.get("input"), dict) else {}
            raw = given.get("arguments")
            raw = raw if isinstance(raw, str) else canonical(raw) if isinstance(raw, dict) else "{}"
            server, tool = str(given.get("server_name", "")), str(given.get("tool_name", ""))
            frames.append(_request(session, f"{index}.{len(frames)}", server, tool, raw, None))
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            for found in _MCP_BLOCK.finditer(block["text"]):
                part = {k: (m.group(1) if (m := rx.search(found.group(1))) else "") for k, rx in _TAG.items()}
                call_id = f"{index}.{len(frames)}"
                frames.append(
                    _request(
                        session, call_id, part["server_name"], part["tool_name"], part["arguments"], None
                    )
                )
    return frames
