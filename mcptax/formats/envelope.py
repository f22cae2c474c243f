"""Envelope JSONL (our proxy's log, and mcpsnoop's session log): one captured frame per line.

Fields (docs/definitions.md): ``session_id``, ``server_label``, ``seq``, ``ts``, ``direction``
(``c2s`` | ``s2c`` | ``stderr`` | ``meta``), ``transport``, ``raw`` (the JSON-RPC message as
embedded JSON, an array for a batch), optional ``text``, ``conn_id``, ``truncated``,
``redacted``, ``batch``, ``status``.

``raw`` given as a JSON *string* is accepted too (some loggers escape it). A ``truncated`` capture
whose raw no longer parses is quarantined as ``truncated_raw``; one that still parses (the logger
cut strings but kept JSON valid) is kept and its calls are marked ``capture_truncated``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

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
_FRAME_DIRECTIONS = frozenset({"c2s", "s2c"})


def parse(
    lines: Iterable[bytes | str], *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[LineEvent]:
    """One LineEvent per input line (see module docstring)."""
    for line in numbered_lines(lines):
        yield parse_line(line, max_line_bytes)


def _scalar_key(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def parse_line(line: RawLine, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> LineEvent:
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
    if "raw" not in record:
        return quarantine(line, "missing_field:raw")

    truncated = record.get("truncated")
    raw = record["raw"]
    if isinstance(raw, str):
        raw, problem = load_json(raw)
        if problem is not None:
            return quarantine(line, "truncated_raw" if truncated else "invalid_raw")
    if isinstance(raw, dict):
        messages, is_batch = [raw], False
    elif isinstance(raw, list):
        if not raw:
            return ignore(line, "empty_batch")
        messages, is_batch = raw, True
    else:
        return quarantine(line, "unknown_shape")

    pointers: tuple[str, ...] = ()
    if isinstance(truncated, list):
        pointers = tuple(p for p in truncated if isinstance(p, str))
    conn_id = _scalar_key(record.get("conn_id")) or ""
    frames: list[Frame] = []
    dropped = 0
    for index, message in enumerate(messages):
        kind = jsonrpc_kind(message)
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
                capture_truncated=bool(truncated),
                truncated_pointers=pointers,
                redacted=bool(record.get("redacted")),
            )
        )
    if not frames:
        return quarantine(line, "unknown_shape")
    notes = (f"dropped_batch_elements:{dropped}",) if dropped else ()
    return frames_event(line, frames, notes)
