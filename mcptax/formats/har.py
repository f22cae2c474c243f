"""HAR 1.2 (mitmproxy, browser devtools) captures of MCP Streamable HTTP traffic.

A HAR file is one JSON document, so its "lines" are its entries: ``log.entries[i]`` is line
``i + 1`` and yields exactly one LineEvent. An entry carries the request body (one JSON-RPC
message or a batch, direction ``c2s``) and the response body (``application/json``, or a
``text/event-stream`` whose SSE events are split into one message each, direction ``s2c``).
A document that is not JSON, or has no ``log.entries`` array, is a single quarantined line 1.

An entry whose request body is a model API request (Anthropic Messages, OpenAI Responses) is no
MCP traffic: it is ignored as ``model_api`` and carries its tool-discovery records (searches,
loads, calls, the model request; ``mcptax.formats.tool_search``), in session
``api:<metadata.user_id>`` (Claude Code names its session there) or ``api:<host><path>``.

Session = the ``Mcp-Session-Id`` request header, else the response's (the initialize response
assigns it), else ``url:<endpoint>`` for stateless servers. Server label = host and path.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from itertools import chain
from typing import Any
from urllib.parse import urlsplit

import ijson

from mcptax.formats import tool_search
from mcptax.formats.records import (
    DEFAULT_MAX_LINE_BYTES,
    FRAME,
    IGNORED,
    MAX_JSON_DEPTH,
    QUARANTINED,
    Frame,
    LineEvent,
    canonical,
    jsonrpc_kind,
    load_json,
    str_or_none,
    too_deep,
    utf8,
)

FORMAT = "har"
DEFAULT_MAX_DOCUMENT_BYTES = 512 * 1024 * 1024
# A document up to this size is parsed whole; a larger one is streamed entry by entry (ijson),
# so memory holds one entry at a time, never the document.
DEFAULT_WHOLE_DOCUMENT_BYTES = 4 * 1024 * 1024
_ENTRIES = "log.entries.item"


def _as_bytes(chunk: bytes | str) -> bytes:
    return chunk if isinstance(chunk, bytes) else chunk.encode("utf-8", "surrogatepass")


def parse(
    lines: Iterable[bytes | str],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
    whole_document_bytes: int = DEFAULT_WHOLE_DOCUMENT_BYTES,
) -> Iterator[LineEvent]:
    """One LineEvent per HAR entry; ``max_line_bytes`` bounds an entry's bodies.

    ``lines`` may be lines or blocks of any size: the document is read as one byte stream.
    """
    chunks = iter(lines)
    head: list[bytes] = []
    size = 0
    for chunk in chunks:
        head.append(_as_bytes(chunk))
        size += len(head[-1])
        if size > whole_document_bytes:
            yield from _stream(head, chunks, max_line_bytes, max_document_bytes)
            return
    yield from _whole(b"".join(head), max_line_bytes)


def _whole(data: bytes, max_line_bytes: int) -> Iterator[LineEvent]:
    if not data.strip():
        return
    document, problem = load_json(data)
    if problem is not None:
        yield LineEvent(1, QUARANTINED, problem, raw=data, length=len(data))
        return
    log = document.get("log") if isinstance(document, dict) else None
    entries = log.get("entries") if isinstance(log, dict) else None
    if not isinstance(entries, list):
        yield LineEvent(1, QUARANTINED, "unknown_shape", raw=data, length=len(data))
        return
    for index, entry in enumerate(entries, start=1):
        yield _entry_event(index, entry, max_line_bytes)


def _stream(
    head: list[bytes], rest: Iterator[bytes | str], max_line_bytes: int, max_document_bytes: int
) -> Iterator[LineEvent]:
    """The entries of a large document as they are parsed.

    The same rules as for a whole document, entry by entry: an entry nested too deep is
    quarantined alone. Where the document turns out broken (not JSON, over
    ``max_document_bytes``), the entries read before stand and the rest is one quarantined unit
    after them; its bytes are not held (the input file is the copy). A document with no entry
    found is one quarantined unit 1, ``unknown_shape``.
    """
    found = ijson.sendable_list()
    parser = ijson.items_coro(found, _ENTRIES, use_float=True)
    index = 0
    size = 0
    problem: str | None = None

    def completed() -> Iterator[LineEvent]:
        nonlocal index
        for entry in found:
            index += 1
            yield _checked_entry_event(index, entry, max_line_bytes)
        del found[:]

    try:
        for chunk in chain(head, (_as_bytes(c) for c in rest)):
            size += len(chunk)
            if size > max_document_bytes:
                problem = "oversize_document"
                break
            parser.send(chunk)
            yield from completed()
        else:
            parser.close()
    except (ijson.JSONError, ValueError):
        problem = "invalid_json"
    # Entries the parser completed before it stopped stand.
    yield from completed()
    if problem is None and index == 0:
        problem = "unknown_shape"
    if problem is not None:
        yield LineEvent(index + 1, QUARANTINED, problem, length=size, notes=(f"after entry {index}",))


def _checked_entry_event(index: int, entry: Any, max_line_bytes: int) -> LineEvent:
    # An entry sits three levels down (document, log, entries): the same depth rule as a whole file.
    if too_deep(entry, MAX_JSON_DEPTH - 3):
        return LineEvent(index, QUARANTINED, "too_deep")
    return _entry_event(index, entry, max_line_bytes)


def _headers(holder: dict[str, Any]) -> dict[str, str]:
    headers: dict[str, str] = {}
    raw = holder.get("headers")
    if isinstance(raw, list):
        for header in raw:
            if isinstance(header, dict) and isinstance(header.get("name"), str):
                value = header.get("value")
                headers[header["name"].lower()] = value if isinstance(value, str) else ""
    return headers


def _body_text(holder: Any) -> tuple[str | None, str | None]:
    """(text, problem) of a postData / content object, decoding base64 bodies."""
    if not isinstance(holder, dict):
        return None, None
    text = holder.get("text")
    if not isinstance(text, str):
        return None, None
    if holder.get("encoding") == "base64":
        try:
            return base64.b64decode(text, validate=True).decode("utf-8"), None
        except (binascii.Error, ValueError):
            return None, "invalid_base64_body"
    return text, None


def split_sse(text: str) -> Iterator[tuple[str, str]]:
    """(event type, data) of each SSE event in a ``text/event-stream`` body.

    Follows the SSE rules MCP relies on: ``data:`` lines join with ``\\n``, a blank line ends an
    event, ``:`` lines are comments; a final event without its blank line still counts (captures
    are often cut there). Events with empty data (stream priming) are skipped.
    """
    event_type = "message"
    data: list[str] = []
    for raw_line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if raw_line == "":
            if data and "\n".join(data):
                yield event_type, "\n".join(data)
            event_type, data = "message", []
            continue
        if raw_line.startswith(":"):
            continue
        name, _, value = raw_line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event_type = value or "message"
    if data and "\n".join(data):
        yield event_type, "\n".join(data)


def _looks_like_json(text: str) -> bool:
    return text.lstrip()[:1] in ("{", "[")


def _messages(value: Any) -> list[tuple[Any, int | None]]:
    if isinstance(value, list):
        return [(m, i) for i, m in enumerate(value)]
    return [(value, None)]


def _response_ts(started: str | None, elapsed_ms: Any) -> str | None:
    if started is None or not isinstance(elapsed_ms, int | float) or isinstance(elapsed_ms, bool):
        return None
    try:
        start = datetime.fromisoformat(started)
        return (start + timedelta(milliseconds=float(elapsed_ms))).isoformat()
    except (ValueError, OverflowError):
        return None


def _frames(value: Any, direction: str, ts: str | None, session_key: str, server_label: str) -> list[Frame]:
    """The JSON-RPC messages of one HTTP body (a message or a batch) as frames of its session."""
    frames = []
    for message, batch_index in _messages(value):
        kind = jsonrpc_kind(message)
        if kind is not None:
            frames.append(
                Frame(
                    kind=kind,
                    message=message,
                    direction=direction,
                    ts=ts,
                    batch_index=batch_index,
                    session_key=session_key,
                    server_label=server_label,
                    transport="http",
                )
            )
    return frames


def _model_api_entry(
    index: int, entry: Any, request: Any, responses: list[Any], times: tuple[str | None, str | None], url: str
) -> LineEvent:
    """An exchange with a model API (Anthropic Messages, OpenAI Responses): no MCP call, ignored
    as ``model_api``; its tool-discovery records ride along (``mcptax.formats.tool_search``). A
    streamed (SSE) response is not reassembled: its searches and calls are read from the next
    request's history, and it counts no model request."""
    parts = urlsplit(url)
    session = tool_search.api_session_key(request, f"api:{parts.netloc}{parts.path}")
    started, finished = (tool_search.parse_time(t) for t in times)
    try:
        found = tool_search.api_events(request, started, index, response=False)
        total = tool_search.deferred_total(request)
        for body in responses:
            found += tool_search.api_events(body, finished or started, index, response=True, total=total)
    except tool_search.MalformedSearch as exc:
        raw = utf8(canonical(entry))
        return LineEvent(index, QUARANTINED, f"malformed_tool_search: {exc}", raw=raw, length=len(raw))
    event = LineEvent(index, IGNORED, "model_api")
    event.discovery = tuple((session, e) for e in found)
    return event


def _entry_event(index: int, entry: Any, max_line_bytes: int) -> LineEvent:
    def quarantined(reason: str) -> LineEvent:
        raw = utf8(canonical(entry))
        return LineEvent(index, QUARANTINED, reason, raw=raw, length=len(raw))

    if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict):
        return quarantined("unknown_shape")
    request = entry["request"]
    response: dict[str, Any] = entry["response"] if isinstance(entry.get("response"), dict) else {}
    request_headers = _headers(request)
    response_headers = _headers(response)
    url = request.get("url") if isinstance(request.get("url"), str) else ""
    parts = urlsplit(url)

    request_text, request_problem = _body_text(request.get("postData"))
    response_text, response_problem = _body_text(response.get("content"))
    size = len(request_text or "") + len(response_text or "")
    if size > max_line_bytes:
        return quarantined("oversize_entry")

    session_key = (
        request_headers.get("mcp-session-id")
        or response_headers.get("mcp-session-id")
        or f"url:{parts.netloc}{parts.path}"
    )
    started = str_or_none(entry.get("startedDateTime"))
    server_label = f"{parts.netloc}{parts.path}"
    frames: list[Frame] = []
    notes: list[str] = [p for p in (request_problem, response_problem) if p]
    # Why the entry is quarantined if nothing usable comes out of it.
    broken_reason: str | None = notes[0] if notes else None

    request_value: Any = None
    if request_text and request_text.strip():
        value, problem = load_json(request_text)
        if problem is not None:
            if _looks_like_json(request_text):
                broken_reason = problem
                notes.append(f"request_body:{problem}")
        else:
            request_value = value
            frames += _frames(value, "c2s", started, session_key, server_label)

    content: dict[str, Any] = response["content"] if isinstance(response.get("content"), dict) else {}
    mime = (str_or_none(content.get("mimeType")) or response_headers.get("content-type", "")).lower()
    response_ts = _response_ts(started, entry.get("time"))
    response_values: list[Any] = []
    if response_text and response_text.strip():
        if "text/event-stream" in mime:
            bodies = [data for event_type, data in split_sse(response_text) if event_type == "message"]
        else:
            bodies = [response_text]
        for body in bodies:
            value, problem = load_json(body)
            if problem is not None:
                if _looks_like_json(body) or "text/event-stream" in mime:
                    broken_reason = problem
                    notes.append(f"response_body:{problem}")
                continue
            response_values.append(value)
            frames += _frames(value, "s2c", response_ts, session_key, server_label)

    if tool_search.is_model_api_body(request_value):
        return _model_api_entry(index, entry, request_value, response_values, (started, response_ts), url)
    if frames:
        return LineEvent(index, FRAME, None, frames=frames, notes=tuple(notes))
    if broken_reason is not None:
        return quarantined(broken_reason)
    if request.get("method") == "DELETE" and "mcp-session-id" in request_headers:
        return LineEvent(index, IGNORED, "session_end")
    return LineEvent(index, IGNORED, "not_mcp")
