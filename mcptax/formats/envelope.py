"""Envelope JSONL (our proxy's log, and mcpsnoop's session log): one captured frame per line.

Fields (docs/definitions.md): ``session_id``, ``server_label``, ``seq``, ``ts``, ``direction``
(``c2s`` | ``s2c`` | ``stderr`` | ``meta``), ``transport``, ``raw`` (the JSON-RPC message as
embedded JSON, an array for a batch), optional ``text``, ``conn_id``, ``truncated``,
``redacted``, ``batch``, ``status``.

``raw`` given as a JSON *string* is accepted too (some loggers escape it). A frame with ``text``
and no ``raw`` (mcpsnoop) or ``raw: null`` (our proxy, ``status: invalid_json``) is non-JSON
output: ignored as ``non_json_output``. A ``truncated`` capture that still parses (the logger cut
strings but kept JSON valid) is kept and its calls are marked ``capture_truncated``; one cut
mid-JSON (a prefix in ``text``, or a ``raw`` string that no longer parses) keeps what its prefix
tells: the request's id, method, tool name and whole top-level arguments, plus the string value
the cut went through, as far as it goes (its pointer in ``truncated_pointers``); a request cut
before its id pairs with the next response nothing else claims. A cut response leaves the result
unknown (``result: None``) unless it shows ``"isError": true``; one whose id is unreadable is
``truncated_raw``.

A ``raw`` that is a model API body (an Anthropic Messages or OpenAI Responses request, ``c2s``, or
response, ``s2c``, as a logging proxy in front of the provider writes it) holds no MCP call: it
is ignored as ``model_api`` and its tool-discovery records (``mcptax.formats.tool_search``) are
passed on; one whose search records cannot be read is quarantined ``malformed_tool_search``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from mcptax.formats import tool_search
from mcptax.formats.records import (
    DEFAULT_MAX_LINE_BYTES,
    Frame,
    LineEvent,
    RawLine,
    frames_event,
    ignore,
    jsonrpc_kind,
    load_json,
    numbered_lines,
    quarantine,
    read_json_object,
    str_or_none,
)

FORMAT = "envelope"
_PREFIX_ID = re.compile(r'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)\s*[,}]')
_PREFIX_METHOD = re.compile(r'"method"\s*:\s*"([^"\\]*)("?)')
_PREFIX_TOOL = re.compile(r'"params"\s*:\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_PREFIX_ARGUMENTS = re.compile(r'"arguments"\s*:\s*\{')
_PREFIX_IS_ERROR = re.compile(r'"isError"\s*:\s*true\b')
_FRAME_DIRECTIONS = frozenset({"c2s", "s2c"})
_DECODER = json.JSONDecoder(strict=False)
# The longest JSON escape (\uXXXX) a cut can split.
_MAX_ESCAPE = 6


def parse(
    lines: Iterable[bytes | str], *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[LineEvent]:
    """One LineEvent per input line (see module docstring)."""
    totals: dict[str, int | None] = {}
    for line in numbered_lines(lines):
        yield parse_line(line, max_line_bytes, totals)


def _scalar_key(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _cut_string(text: str) -> str:
    """The text of a JSON string whose closing quote was cut off (``text`` follows the opening quote)."""
    for drop in range(min(_MAX_ESCAPE, len(text)) + 1):
        try:
            value = _DECODER.decode(f'"{text[: len(text) - drop]}"')
        except json.JSONDecodeError:
            continue
        if isinstance(value, str):
            return value
    return ""


def _arguments_from_prefix(text: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The top-level arguments a cut ``tools/call`` still shows: each complete key/value pair, and
    the string value the cut went through (its pointer returned: that bulk argument is cut)."""
    found = _PREFIX_ARGUMENTS.search(text)
    arguments: dict[str, Any] = {}
    if found is None:
        return arguments, ()
    at = found.end()
    while True:
        at = _skip_space(text, at)
        try:
            key, at = _DECODER.raw_decode(text, at)
        except json.JSONDecodeError:
            return arguments, ()  # cut inside a key, or no further pair
        at = _skip_space(text, at)
        if not isinstance(key, str) or not text.startswith(":", at):
            return arguments, ()
        at = _skip_space(text, at + 1)
        try:
            value, at = _DECODER.raw_decode(text, at)
        except json.JSONDecodeError:
            if text.startswith('"', at):
                arguments[key] = _cut_string(text[at + 1 :])
                return arguments, ("/" + key.replace("~", "~0").replace("/", "~1"),)
            return arguments, ()  # cut inside a nested value: its part is not kept
        arguments[key] = value
        at = _skip_space(text, at)
        if not text.startswith(",", at):
            return arguments, ()
        at += 1


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _from_prefix(text: str, direction: str) -> tuple[dict[str, Any] | None, tuple[str, ...]]:
    """What the start of a frame cut mid-JSON still says, and the pointers of cut arguments.

    A request: its id if readable, method, tool name and the arguments its prefix shows
    (:func:`_arguments_from_prefix`). A response with a readable id: its result is unknown (None)
    unless the prefix already shows ``"isError": true``. None when it says nothing usable.
    """
    found_id = _PREFIX_ID.search(text)
    message_id, problem = load_json(found_id.group(1)) if found_id else (None, None)
    if problem is not None:
        message_id = None
    if direction == "s2c":
        if message_id is None:
            return None, ()
        result = {"isError": True} if _PREFIX_IS_ERROR.search(text) else None
        return {"jsonrpc": "2.0", "id": message_id, "result": result}, ()
    method = _PREFIX_METHOD.search(text)
    tool = _PREFIX_TOOL.search(text)
    name, _ = load_json(f'"{tool.group(1)}"') if tool else ("", None)
    if method is not None and method.group(2):
        full_method = method.group(1)
    elif "tools/call".startswith(method.group(1) if method else ""):
        full_method = "tools/call"  # cut inside (or before) the method: the only cut frames worth keeping
    else:
        return None, ()
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": full_method}
    if message_id is not None:
        message["id"] = message_id
    pointers: tuple[str, ...] = ()
    if full_method == "tools/call":
        arguments, pointers = _arguments_from_prefix(text)
        message["params"] = {"name": name if isinstance(name, str) else "", "arguments": arguments}
    return message, pointers


def _model_api_line(
    line: RawLine,
    body: dict[str, Any],
    session_key: str,
    record: dict[str, Any],
    totals: dict[str, int | None],
) -> LineEvent:
    """A model API body (Anthropic Messages, OpenAI Responses) a logging proxy captured: no MCP
    call, ignored as ``model_api``, but its tool-discovery records ride along. ``totals``: the
    deferred tools of each session's last request, for the response that follows it."""
    event = ignore(line, "model_api")
    at = tool_search.parse_time(record.get("ts"))
    response = record.get("direction") == "s2c"
    if not response:
        totals[session_key] = tool_search.deferred_total(body)
    try:
        found = tool_search.api_events(
            body, at, line.line_no, response=response, total=totals.get(session_key)
        )
    except tool_search.MalformedSearch as exc:
        return quarantine(line, f"malformed_tool_search: {exc}")
    event.discovery = tuple((session_key, e) for e in found)
    return event


def _payload(
    line: RawLine, record: dict[str, Any], direction: str
) -> tuple[Any, tuple[str, ...]] | LineEvent:
    """The frame's JSON-RPC payload (``raw``, a ``raw`` string parsed, or what a cut prefix tells)
    and the pointers of the strings a cut went through; else the line's ignore or quarantine event."""
    truncated = record.get("truncated")
    raw = record.get("raw")
    cut_pointers: tuple[str, ...] = ()
    if raw is None:
        text = record.get("text")
        if truncated and isinstance(text, str):
            raw, cut_pointers = _from_prefix(text, direction)
            if raw is None:
                return quarantine(line, "truncated_raw")
        elif isinstance(text, str) or record.get("status") == "invalid_json":
            return ignore(line, "non_json_output")
        else:
            return quarantine(line, "missing_field:raw")
    if isinstance(raw, str):
        text, (raw, problem) = raw, load_json(raw)
        if problem is not None and truncated:
            raw, cut_pointers = _from_prefix(text, direction)
        if raw is None or (problem is not None and not truncated):
            return quarantine(line, "truncated_raw" if truncated else "invalid_raw")
    return raw, cut_pointers


def parse_line(
    line: RawLine, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, totals: dict[str, int | None] | None = None
) -> LineEvent:
    record = read_json_object(line, max_line_bytes)
    if isinstance(record, LineEvent):
        return record
    direction = record.get("direction")
    if direction is None:
        return quarantine(line, "missing_field:direction")
    if direction == "stderr":
        return ignore(line, "stderr")
    if direction == "meta":
        return ignore(line, "meta")
    if not isinstance(direction, str) or direction not in _FRAME_DIRECTIONS:
        return quarantine(line, "invalid_field:direction")
    session_key = _scalar_key(record.get("session_id"))
    if session_key is None:
        return quarantine(line, "missing_field:session_id")
    truncated = record.get("truncated")
    payload = _payload(line, record, direction)
    if isinstance(payload, LineEvent):
        return payload
    raw, cut_pointers = payload
    if tool_search.is_model_api_body(raw):
        return _model_api_line(line, raw, session_key, record, {} if totals is None else totals)
    if isinstance(raw, dict):
        messages, is_batch = [raw], False
    elif isinstance(raw, list):
        if not raw:
            return ignore(line, "empty_batch")
        messages, is_batch = raw, True
    else:
        return quarantine(line, "unknown_shape")

    pointers = cut_pointers
    if isinstance(truncated, list):
        pointers += tuple(p for p in truncated if isinstance(p, str))
    conn_id = _scalar_key(record.get("conn_id")) or ""
    seq = record.get("seq")
    frames: list[Frame] = []
    dropped = 0
    for index, message in enumerate(messages):
        kind = jsonrpc_kind(message)
        if kind == "notification" and truncated and message.get("method") == "tools/call":
            kind = "request"  # cut before its id (a tools/call always has one): paired by its response
        if kind is None:
            dropped += 1
            continue
        frames.append(
            Frame(
                kind=kind,
                session_key=session_key,
                message=message,
                direction=direction,
                conn_id=conn_id,
                ts=str_or_none(record.get("ts")),
                server_label=str_or_none(record.get("server_label")) or "",
                transport=str_or_none(record.get("transport")),
                batch_index=index if is_batch else None,
                seq=seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
                capture_truncated=bool(truncated),
                truncated_pointers=pointers,
                redacted=bool(record.get("redacted")),
            )
        )
    if not frames:
        return quarantine(line, "unknown_shape")
    notes = (f"dropped_batch_elements:{dropped}",) if dropped else ()
    return frames_event(line, frames, notes)
