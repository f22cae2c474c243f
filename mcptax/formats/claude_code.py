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

Tool discovery (``ToolSearch`` searches, their results, compaction boundaries, model requests and
MCP calls) rides along on each line as ``LineEvent.discovery`` (``mcptax.formats.tool_search``).
A ToolSearch line in a shape we cannot read is quarantined as ``malformed_tool_search: ...``
when it holds nothing else; otherwise its other calls are kept and the problem is a note.

The server part of the name is split at the first ``__`` after ``mcp__``; Claude Code replaces
characters outside ``[A-Za-z0-9_-]`` in server names, so a server name containing ``__`` is
ambiguous and is read as ending at the first ``__``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from mcptax.discovery import DiscoveryEvent
from mcptax.formats import tool_search
from mcptax.formats.records import (
    BUILTIN_TOOL_METHOD,
    DEFAULT_MAX_LINE_BYTES,
    AgentInfo,
    Frame,
    LineEvent,
    RawLine,
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
    # ToolSearch queries by tool_use id, until their results are read.
    queries: dict[str, str] = dict((state or {}).get("tool_searches") or {})
    for line in numbered_lines(lines):
        record = read_json_object(line, max_line_bytes)
        if isinstance(record, LineEvent):
            yield record
            continue
        kind = record.get("type")
        if not isinstance(kind, str):
            yield quarantine(line, "unknown_shape")
            continue
        # Every line normally carries sessionId; a line that lost it belongs to the file's session.
        # Headless ``claude -p --output-format stream-json`` writes ``session_id``.
        session = (
            str_or_none(record.get("sessionId")) or str_or_none(record.get("session_id")) or last_session
        )
        last_session = session or last_session
        if kind not in ("user", "assistant"):
            yield _meta_line(line, record, session)
            continue
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

        if kind == "assistant":
            frames = _assistant_frames(message, record, blocks, common)
        else:
            frames = _result_frames(blocks, common)
        yield _line_event(line, kind, record, frames, session, queries)
    if state is not None:
        state["last_session"] = last_session
        state["tool_searches"] = queries


def _assistant_frames(
    message: dict[str, Any], record: dict[str, Any], blocks: list[dict[str, Any]], common: dict[str, Any]
) -> list[Frame]:
    """An assistant line's tool calls (``tool_use`` blocks) and its output tokens."""
    frames: list[Frame] = []
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
    return frames


def _result_frames(blocks: list[dict[str, Any]], common: dict[str, Any]) -> list[Frame]:
    """A user line's tool results (``tool_result`` blocks), as responses."""
    frames: list[Frame] = []
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
            Frame(kind="response", message=response, direction="s2c", client_call_id=call_id, **common)
        )
    return frames


def _line_event(
    line: RawLine,
    kind: str,
    record: dict[str, Any],
    frames: list[Frame],
    session: str | None,
    queries: dict[str, str],
) -> LineEvent:
    """The line's event: its frames, with the discovery records it shows; a ToolSearch we cannot
    read quarantines the line when it holds nothing else, and is a note beside other calls. Either
    way the line's other records (a model request, other searches, calls) are kept."""
    message: dict[str, Any] = record["message"]
    content = message.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    searches = tool_search.claude_code_search_ids(blocks, record, queries)
    at = tool_search.parse_time(str_or_none(record.get("timestamp")))
    found: list[DiscoveryEvent]
    try:
        if kind == "assistant":
            found = tool_search.claude_code_assistant(message, blocks, at, line.line_no, queries)
        else:
            found = tool_search.claude_code_user(record, blocks, at, line.line_no, queries)
        problem = None
    except tool_search.MalformedSearch as exc:
        found, problem = exc.events, f"malformed_tool_search: {exc}"
    others = [f for f in frames if f.kind != "usage" and f.client_call_id not in searches]
    if problem is not None and not others:
        event = quarantine(line, problem)
    elif not frames:
        event = ignore(line, "not_a_tool_call")
    elif session is None:
        return quarantine(line, "missing_field:sessionId")
    else:
        event = frames_event(line, frames, notes=(problem,) if problem else ())
    if session is not None:
        event.discovery = tuple((session, e) for e in found)
    return event


def _meta_line(line: RawLine, record: dict[str, Any], session: str | None) -> LineEvent:
    """A bookkeeping line: ignored as ``meta``; a compaction boundary also carries its Compaction."""
    event = ignore(line, "meta")
    if session is None:
        return event
    try:
        found = tool_search.claude_code_compaction(
            record, tool_search.parse_time(str_or_none(record.get("timestamp"))), line.line_no
        )
    except tool_search.MalformedSearch as exc:
        return quarantine(line, f"malformed_tool_search: {exc}")
    if found is not None:
        event.discovery = ((session, found),)
    return event
