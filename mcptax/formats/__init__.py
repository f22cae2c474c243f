"""Log formats the ingest pipeline reads, and format autodetection (no Django here).

Typical use::

    with open(path, "rb") as f:
        fmt = detect_format(f.read(DETECT_BYTES)); f.seek(0)
        for item in read_calls(f, fmt):
            ...  # ObservedCall -> persist; LineOutcome -> count / persist

``read_calls`` = ``parse`` + ``assemble``; see ``assemble.py`` for the reconciliation and
resume contract.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from mcptax.formats import claude_code, cline, codex, codex_exec, envelope, har
from mcptax.formats.assemble import CallAssembler, Output, assemble
from mcptax.formats.records import (
    DEFAULT_MAX_LINE_BYTES,
    AgentInfo,
    Frame,
    LineEvent,
    LineOutcome,
    ObservedCall,
    load_json,
    normalize_agent_family,
)
from mcptax.formats.tally import Tally

FORMATS: tuple[str, ...] = ("envelope", "har", "claude-code", "codex", "codex-exec", "cline")
DETECT_BYTES = 64 * 1024

PARSERS: dict[str, Callable[..., Iterator[LineEvent]]] = {
    "envelope": envelope.parse,
    "har": har.parse,
    "claude-code": claude_code.parse,
    "codex": codex.parse,
    "codex-exec": codex_exec.parse,
    "cline": cline.parse,
}

_CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_CLAUDE_TYPES = frozenset({"user", "assistant", "summary", "system", "file-history-snapshot"})
_HAR_START = re.compile(rb'^\s*\{\s*"log"\s*:')
# A Cline / Roo Code task history: one JSON array of chat messages (ui_messages.json: ``ts`` and
# ``type`` ask|say) or of model messages (api_conversation_history.json: ``role``).
_CLINE_START = re.compile(
    rb'^\s*\[\s*\{\s*"(?:ts"\s*:\s*\d|type"\s*:\s*"(?:say|ask)"|role"\s*:\s*"(?:user|assistant)")'
)


class UnknownFormatError(ValueError):
    """The input matches none of the known log formats."""


def _classify(record: dict[str, Any]) -> str | None:
    if "direction" in record and ("session_id" in record or "raw" in record):
        return "envelope"
    kind = record.get("type") if isinstance(record.get("type"), str) else None
    if kind in _CODEX_TYPES and "payload" in record:
        return "codex"
    if kind in codex_exec.EVENT_TYPES and kind != "error":  # a bare "error" says too little alone
        return "codex-exec"
    if "record_type" in record or (kind is None and "instructions" in record and "id" in record):
        return "codex"
    if "sessionId" in record or "parentUuid" in record or (kind in _CLAUDE_TYPES and "payload" not in record):
        return "claude-code"
    if isinstance(record.get("log"), dict):
        return "har"
    return None


def detect_format(first_bytes: bytes) -> str:
    """``envelope`` | ``har`` | ``claude-code`` | ``codex`` | ``codex-exec`` | ``cline`` from the
    start of a file.

    Looks at the first JSON lines (a HAR may be pretty-printed over many lines, and a transcript
    may open with bookkeeping lines). Raises UnknownFormatError saying what was seen otherwise.
    """
    data = first_bytes.removeprefix(b"\xef\xbb\xbf")
    if _HAR_START.match(data):
        return "har"
    if _CLINE_START.match(data):
        return "cline"
    seen: list[str] = []
    for line in data.splitlines()[:50]:
        if not line.strip():
            continue
        record, problem = load_json(line)
        if problem is not None:
            seen.append(problem)
            continue
        if not isinstance(record, dict):
            seen.append(f"JSON {type(record).__name__}")
            continue
        found = _classify(record)
        if found is not None:
            return found
        seen.append("object with keys " + ",".join(sorted(map(str, record))[:8]))
    detail = "; ".join(dict.fromkeys(seen)) if seen else "no data"
    raise UnknownFormatError(
        f"cannot tell the log format ({detail}); expected one of {', '.join(FORMATS)} "
        "(envelope JSONL, HAR 1.2, Claude Code session JSONL, Codex CLI rollout JSONL, codex exec --json "
        "events, Cline / Roo Code task history JSON)"
    )


# Formats read line by line, each line on its own or with a small state carried over (``state``):
# a tailed file of these is read on from a byte offset, and a large one may be split in ranges.
LINE_FORMATS = frozenset({"envelope", "claude-code", "codex", "codex-exec"})
# Formats that are one JSON document whose "lines" are its entries (HAR entries, the elements of a
# Cline / Roo Code history): read as a stream of blocks whatever its line breaks, counted in entries.
DOCUMENT_FORMATS = frozenset({"har", "cline"})
_STATEFUL_PARSERS = frozenset({"claude-code", "codex", "codex-exec"})


def parse(
    lines: Iterable[bytes | str],
    format: str,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    state: dict[str, Any] | None = None,
) -> Iterator[LineEvent]:
    """One LineEvent per input line (HAR: per entry) for a known format.

    ``state`` (LINE_FORMATS only): the parser's state after the lines read before, updated in
    place once ``lines`` are exhausted (see ``mcptax.formats.state``).
    """
    try:
        parser = PARSERS[format]
    except KeyError:
        raise UnknownFormatError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}") from None
    if state is not None and format in _STATEFUL_PARSERS:
        return parser(lines, max_line_bytes=max_line_bytes, state=state)
    return parser(lines, max_line_bytes=max_line_bytes)


def read_calls(
    lines: Iterable[bytes | str],
    format: str,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    skip_through_line: int = 0,
) -> Iterator[Output]:
    """ObservedCalls and one LineOutcome per input line, in a deterministic order."""
    return assemble(
        parse(lines, format, max_line_bytes=max_line_bytes), format, skip_through_line=skip_through_line
    )


__all__ = [
    "DETECT_BYTES",
    "DOCUMENT_FORMATS",
    "FORMATS",
    "LINE_FORMATS",
    "PARSERS",
    "AgentInfo",
    "CallAssembler",
    "Frame",
    "LineEvent",
    "LineOutcome",
    "ObservedCall",
    "Tally",
    "UnknownFormatError",
    "assemble",
    "detect_format",
    "normalize_agent_family",
    "parse",
    "read_calls",
]
