"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

Each line is one record: ``type`` ``user`` / ``assistant`` carry a ``message`` (Anthropic API
shape); ``summary``, ``system``, ``file-history-snapshot`` and other bookkeeping types are
``ignored: meta``. Claude Code writes one line per content block of an assistant message, each
repeating ``message.id`` and a ``usage`` snapshot; a copy may hold the streaming-start figure,
so the largest ``output_tokens`` among the copies is the message's. Headless
``claude -p --output-format stream-json`` logs (``session_id``, ``type`` ``system`` / ``assistant``
/ ``user`` / ``result``) are read the same way.

- ``tool_use`` blocks named ``mcp__<server>__<tool>`` become ``tools/call`` requests whose
  JSON-RPC id and client call id are ``tool_use.id`` (the same id Claude Code puts in
  ``params._meta["claudecode/toolUseId"]`` on the wire). Other tool_use blocks (Bash, Read ...)
  become built-in tool requests, so their results are recognized and their inputs share the
  turn's output tokens.
- ``tool_result`` blocks in user lines become responses (``is_error`` -> ``isError``).
- ``usage.output_tokens`` becomes a usage frame for the turn ``message.id``.
- Agent = ``claude-code`` with the line's ``version``.

The server part of the name is split at the first ``__`` after ``mcp__``; Claude Code replaces
characters outside ``[A-Za-z0-9_-]`` in server names, so a server name containing ``__`` is
ambiguous and is read as ending at the first ``__``.
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
    frames_event,
    ignore,
    numbered_lines,
    quarantine,
    read_json_object,
    str_or_none,
    tools_call,
)

FORMAT = "claude-code"
MCP_PREFIX = "mcp__"


def split_tool_name(name: str) -> tuple[str, str] | None:
    """``mcp__server__tool`` -> ``("server", "tool")``; None for a built-in tool name."""
    if not name.startswith(MCP_PREFIX):
        return None
    rest = name[len(MCP_PREFIX) :]
    server, sep, tool = rest.partition("__")
    if not sep:
        return "", rest
    return server, tool


def _result_content(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [c if isinstance(c, dict) else {"type": "text", "text": str(c)} for c in content]
    return []


def parse(
    lines: Iterable[bytes | str],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    state: dict[str, Any] | None = None,
) -> Iterator[LineEvent]:
    """One LineEvent per transcript line (see module docstring).

    ``state``: the session the lines read before ended in (a tailed file read on from an offset),
    updated in place once these lines are exhausted.
    """
    last_session: str | None = (state or {}).get("last_session")
    for line in numbered_lines(lines):
        record = read_json_object(line, max_line_bytes)
        if isinstance(record, LineEvent):
            yield record
            continue
        kind = record.get("type")
        if not isinstance(kind, str):
            yield quarantine(line, "unknown_shape")
            continue
        if kind not in ("user", "assistant"):
            yield ignore(line, "meta")
            continue
        # Every line normally carries sessionId; a line that lost it belongs to the file's session.
        # Headless ``claude -p --output-format stream-json`` writes ``session_id``.
        session = (
            str_or_none(record.get("sessionId")) or str_or_none(record.get("session_id")) or last_session
        )
        last_session = session or last_session
        message = record.get("message")
        if not isinstance(message, dict):
            yield quarantine(line, "missing_field:message")
            continue
        version = str_or_none(record.get("version"))
        agent = AgentInfo("claude-code", "claude-code", version, "Claude Code", source="transcript")
        chain = f"{'side' if record.get('isSidechain') else 'main'}:{record.get('agentId') or ''}"
        ts = str_or_none(record.get("timestamp"))
        content = message.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []

        common: dict[str, Any] = {
            "session_key": session or "",
            "ts": ts,
            "agent": agent,
            "chain": f"{session}:{chain}",
            "transport": "transcript",
        }

        frames: list[Frame] = []
        if kind == "assistant":
            turn_id = str_or_none(message.get("id")) or str_or_none(record.get("uuid"))
            for block in blocks:
                if block.get("type") != "tool_use":
                    continue
                call_id, name = str_or_none(block.get("id")), str_or_none(block.get("name"))
                if call_id is None or name is None:
                    continue
                arguments = block.get("input") if isinstance(block.get("input"), dict) else {}
                split = split_tool_name(name)
                method = "tools/call" if split else BUILTIN_TOOL_METHOD
                server, tool = split if split else ("", name)
                request = tools_call(call_id, tool, arguments, method)
                frames.append(
                    Frame(
                        kind="request",
                        message=request,
                        client_call_id=call_id,
                        turn_id=turn_id,
                        server_label=server,
                        **common,
                    )
                )
            usage = message.get("usage")
            output = usage.get("output_tokens") if isinstance(usage, dict) else None
            if isinstance(output, int) and not isinstance(output, bool) and output >= 0:
                frames.append(Frame(kind="usage", turn_id=turn_id, output_tokens=output, **common))
        else:
            for block in blocks:
                if block.get("type") != "tool_result":
                    continue
                call_id = str_or_none(block.get("tool_use_id"))
                if call_id is None:
                    continue
                result = {
                    "content": _result_content(block.get("content")),
                    "isError": bool(block.get("is_error")),
                }
                response = {"jsonrpc": "2.0", "id": call_id, "result": result}
                frames.append(
                    Frame(
                        kind="response", message=response, direction="s2c", client_call_id=call_id, **common
                    )
                )
        if not frames:
            yield ignore(line, "not_a_tool_call")
        elif session is None:
            yield quarantine(line, "missing_field:sessionId")
        else:
            yield frames_event(line, frames)
    if state is not None:
        state["last_session"] = last_session
