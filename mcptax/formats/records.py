"""Records shared by the log parsers and the call assembler (no Django here).

The pipeline is ``parse(lines) -> LineEvent*`` then ``CallAssembler -> (ObservedCall | LineOutcome)*``.
Every input "line" (a physical line for the JSONL formats, an entry for HAR) yields exactly one
LineEvent, and later exactly one LineOutcome, so an ingest can always prove
``read == stored + duplicate + ignored + quarantined``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from mcptax import fastjson
from mcptax.discovery import DiscoveryEvent

# docs/definitions.md's canonical JSON, defined once; re-exported for the parsers and the fidelity engine.
from mcptax.tokens import canonical as canonical

DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
# JSON nested deeper than this is quarantined: nothing legitimate nests this far, and it keeps
# every later walk (canonical dumps, bulk search, a database's JSON column) far from recursion limits.
MAX_JSON_DEPTH = 200

# LineEvent statuses (what the parser saw).
FRAME: Final = "frame"
IGNORED: Final = "ignored"
QUARANTINED: Final = "quarantined"
# A line repeating a frame already read (same session and seq): never a second call.
DUPLICATE: Final = "duplicate"
# LineOutcome statuses (what became of the line). CALL lines are the ones the Django layer stores,
# or counts as duplicate when every call they formed was already stored.
CALL: Final = "call"

PROXY_FORMATS = frozenset({"envelope", "har"})
TRANSCRIPT_FORMATS = frozenset({"claude-code", "codex", "codex-exec", "cline"})
# Transcripts whose turns are one per session at a time, closed by a usage record (Codex's
# ``token_count``, ``codex exec``'s ``turn.completed``).
SESSION_TURN_FORMATS = frozenset({"codex", "codex-exec"})
# Transcripts that keep a call's arguments as the raw text the model wrote (hashed as written).
RAW_ARGUMENT_FORMATS = frozenset({"codex", "cline"})

# A synthetic JSON-RPC method for tool calls an agent makes to its own built-in tools (Bash,
# shell, apply_patch ...): they are requests the assembler must recognize (so their results are
# not reported as orphans) but never MCP calls.
BUILTIN_TOOL_METHOD = "agent/builtin_tool"


def utf8(text: str) -> bytes:
    """UTF-8 bytes of a decoded JSON string.

    JSON may carry lone surrogates (``"\\ud800"``); strict encoding would raise on them, so they
    are passed through (deterministic, and never equal to any valid text's bytes).
    """
    return text.encode("utf-8", "surrogatepass")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class AgentInfo:
    """Who made a call: clientInfo (initialize or _meta) or the transcript's producer."""

    family: str
    name: str
    version: str | None = None
    title: str | None = None
    source: str = "clientInfo"  # "initialize" | "meta" | "transcript"


# Ordered: the first substring found in the lowercased name (or title) wins, so the more specific
# names come first ("cursor-vscode" is Cursor, not VS Code).
_FAMILY_RULES: tuple[tuple[str, str], ...] = (
    ("claude-code", "claude-code"),
    ("claude code", "claude-code"),
    ("claude_code", "claude-code"),
    ("codex", "codex"),
    ("gemini", "gemini-cli"),
    ("cursor", "cursor"),
    ("windsurf", "windsurf"),
    ("claude-ai", "claude-desktop"),
    ("claude desktop", "claude-desktop"),
    ("copilot", "github-copilot"),
    ("visual studio code", "vscode"),
    ("vscode", "vscode"),
    ("zed", "zed"),
    ("cline", "cline"),
    ("roo", "roo-code"),
    ("goose", "goose"),
    ("continue", "continue"),
    ("inspector", "mcp-inspector"),
)


def normalize_agent_family(name: str | None, title: str | None = None) -> str:
    """Family of a client name: ``claude-code``, ``codex``, ``gemini-cli``, ``cursor`` ...

    Unknown names become a lowercase slug of the name so they still group by themselves.
    """
    for candidate in (name, title):
        if not candidate:
            continue
        lowered = candidate.lower()
        for needle, family in _FAMILY_RULES:
            if needle in lowered:
                return family
    slug = re.sub(r"[^a-z0-9]+", "-", (name or title or "").lower()).strip("-")
    return slug or "unknown"


def agent_from_client_info(info: Any, source: str) -> AgentInfo | None:
    """AgentInfo from an MCP ``clientInfo`` object, or None when it is not a usable object."""
    if not isinstance(info, dict):
        return None
    name = info.get("name")
    if not isinstance(name, str) or not name:
        return None
    version = info.get("version")
    title = info.get("title")
    return AgentInfo(
        family=normalize_agent_family(name, title if isinstance(title, str) else None),
        name=name,
        version=version if isinstance(version, str) else None,
        title=title if isinstance(title, str) else None,
        source=source,
    )


@dataclass
class Frame:
    """One message relevant to calls, as the parser understood it.

    For the proxy formats ``message`` is the JSON-RPC message as captured. For transcripts the
    parser synthesizes the equivalent JSON-RPC shape (a ``tools/call`` request from a tool_use /
    function_call, a response from its result) so one assembler serves every format.
    """

    kind: Literal["request", "response", "notification", "usage", "session"]
    session_key: str
    message: dict[str, Any] | None = None
    direction: str = "c2s"
    conn_id: str = ""
    ts: str | None = None
    server_label: str = ""
    transport: str | None = None
    batch_index: int | None = None
    # The capturing tool's frame number within the session (envelope ``seq``): a frame read again
    # under the same (session, seq) is a repeat of the same frame.
    seq: int | None = None
    # The capture cut something in this message (envelope ``truncated``); pointers when known.
    capture_truncated: bool = False
    truncated_pointers: tuple[str, ...] = ()
    redacted: bool = False
    # Codex passes arguments as a raw JSON string; its exact bytes are what the model produced.
    arguments_raw: str | None = None
    # Transcript call id (Claude Code tool_use.id, Codex call_id).
    client_call_id: str | None = None
    # Transcript turn (Claude Code message.id) and the chain it belongs to (main or a sidechain).
    turn_id: str | None = None
    chain: str | None = None
    # A response whose record states the call's duration (Codex ``mcp_tool_call_end``): it wins
    # over a plain output of the same call, and its duration over the timestamps' difference.
    duration_ms: float | None = None
    # Usage frames: output tokens of the turn as this copy states them (Claude Code: the largest wins).
    output_tokens: int | None = None
    # Transcript producer, e.g. claude-code 2.0.14 from the line's ``version`` field.
    agent: AgentInfo | None = None


@dataclass
class LineEvent:
    """What the parser made of one input line (or HAR entry): exactly one per line."""

    line_no: int
    status: Literal["frame", "ignored", "quarantined"]
    reason: str | None = None
    frames: list[Frame] = field(default_factory=list)
    # Kept for quarantined lines, in full (never truncated), so they can be inspected and replayed.
    raw: bytes | None = None
    # Byte offset of the line's start and its length in the input (HAR: 0 and the entry's size).
    offset: int = 0
    length: int = 0
    # Non-fatal problems inside a kept line, e.g. an SSE event in a HAR body whose data is not JSON.
    notes: tuple[str, ...] = ()
    # Tool-discovery records the line shows (searches, compactions, model requests, deferrable
    # tool calls), by session key; passed on as a ``Discovered`` whatever the line's status.
    discovery: tuple[tuple[str, DiscoveryEvent], ...] = ()


@dataclass
class ObservedCall:
    """A normalized ``tools/call`` as observed in a log, ready to persist."""

    format: str
    session_key: str
    server_label: str
    conn_id: str
    jsonrpc_id: Any
    client_call_id: str | None
    tool: str
    arguments: dict[str, Any]
    arguments_raw_bytes: int
    arguments_sha256: str
    meta: dict[str, Any] | None
    request_ts: str | None
    response_ts: str | None
    duration_ms: float | None
    result: dict[str, Any] | None
    is_error: bool | None
    jsonrpc_error: dict[str, Any] | None
    agent: AgentInfo | None
    output_tokens: int | None
    line_numbers: tuple[int, ...]
    dedupe_key: str
    claudecode_tool_use_id: str | None
    # Raw Codex arguments string (None for other formats: their arguments are canonical JSON).
    arguments_raw: str | None = None
    # The turn's whole output tokens and how many tool calls (MCP or built-in) shared them.
    turn_output_tokens: int | None = None
    turn_tool_calls: int | None = None
    # Claude Code: the recorded figure was below the tokens of the tool inputs the turn wrote, so
    # the turn's figure is those counted tokens (see measures.turn_shares).
    output_tokens_estimated: bool = False
    transport: str | None = None
    capture_truncated: bool = False
    truncated_pointers: tuple[str, ...] = ()
    redacted: bool = False
    server_info: dict[str, Any] | None = None
    # True when the input ended before any response for this request was seen.
    unanswered: bool = False
    # The log carried none of the call's arguments (telemetry without the client's tool details).
    no_content: bool = False


@dataclass
class Discovered:
    """Tool-discovery records one input line showed, for ``ingest.discovery.store.record_discovery``.

    Not a line outcome: the line still gets its own ``LineOutcome``.
    """

    format: str
    line_no: int
    session_key: str
    events: tuple[DiscoveryEvent, ...]
    agent: AgentInfo | None = None


@dataclass
class LineOutcome:
    """The final fate of one input line.

    ``status`` is ``call`` (the line formed the calls in ``call_keys``; the Django layer counts it
    as stored if any of those calls is new, else as duplicate), ``duplicate`` (the line repeats a
    frame already read in this input), ``ignored`` or ``quarantined`` (with ``reason``;
    quarantined lines keep ``raw``). ``watermark`` is the highest N such that the
    outcomes of lines 1..N have all been emitted by the time this one is: a safe resume point.
    """

    line_no: int
    status: Literal["call", "duplicate", "ignored", "quarantined"]
    reason: str | None
    call_keys: tuple[str, ...] = ()
    raw: bytes | None = None
    watermark: int = 0
    # Set on an initialize line: the session it opened and the client it named.
    session_key: str | None = None
    agent: AgentInfo | None = None


class LongLine(bytes):
    """A line too long to hold in memory: the bytes are only its head, the whole line (without its
    terminator) was kept elsewhere by the reader, as ``ref``, with its ``sha256`` and ``size``.

    The reader that meets such a line never parses it: it is quarantined as ``oversize_line``.
    """

    length: int  # bytes in the input, terminator included
    size: int  # bytes of the line without its terminator (what sha256 covers)
    sha256: str
    ref: str

    def __new__(cls, head: bytes, *, length: int, size: int, sha256: str, ref: str) -> LongLine:
        line = super().__new__(cls, head)
        line.length, line.size, line.sha256, line.ref = length, size, sha256, ref
        return line


@dataclass(frozen=True)
class RawLine:
    line_no: int
    offset: int
    length: int  # bytes including the terminator
    body: bytes  # without the terminator


def numbered_lines(lines: Iterable[bytes | str]) -> Iterator[RawLine]:
    """Number the lines (1-based) and track byte offsets.

    Accepts a binary file object (iterating yields lines ending in ``\\n``) or any iterable of
    bytes/str lines. A final line without ``\\n`` still counts; an empty chunk is not a line.
    """
    offset = 0
    line_no = 0
    for chunk in lines:
        if isinstance(chunk, LongLine):
            line_no += 1
            yield RawLine(line_no, offset, chunk.length, chunk)
            offset += chunk.length
            continue
        data = chunk if isinstance(chunk, bytes) else chunk.encode("utf-8", "surrogatepass")
        if not data:
            continue
        line_no += 1
        body = data
        if body.endswith(b"\n"):
            body = body[:-1]
            if body.endswith(b"\r"):
                body = body[:-1]
        yield RawLine(line_no, offset, len(data), body)
        offset += len(data)


def read_json_object(line: RawLine, max_line_bytes: int) -> dict[str, Any] | LineEvent:
    """The line's JSON object, or the LineEvent that settles a line which is not one.

    Shared first step of the JSONL parsers: oversize (quarantined whole, never truncated), blank
    (ignored), not JSON / not an object (quarantined with the raw bytes).
    """
    if isinstance(line.body, LongLine) or len(line.body) > max_line_bytes:
        return quarantine(line, "oversize_line")
    if not line.body.strip():
        return LineEvent(line.line_no, IGNORED, "blank", offset=line.offset, length=line.length)
    value, problem = load_json(line.body)
    if problem is not None:
        return quarantine(line, problem)
    if not isinstance(value, dict):
        return quarantine(line, "unknown_shape")
    return value


def quarantine(line: RawLine, reason: str) -> LineEvent:
    return LineEvent(line.line_no, QUARANTINED, reason, raw=line.body, offset=line.offset, length=line.length)


def ignore(line: RawLine, reason: str) -> LineEvent:
    return LineEvent(line.line_no, IGNORED, reason, offset=line.offset, length=line.length)


def frames_event(line: RawLine, frames: list[Frame], notes: tuple[str, ...] = ()) -> LineEvent:
    return LineEvent(
        line.line_no, FRAME, None, frames=frames, offset=line.offset, length=line.length, notes=notes
    )


def tools_call(call_id: Any, tool: str, arguments: Any, method: str = "tools/call") -> dict[str, Any]:
    """The JSON-RPC request a transcript's tool call stands for (what a proxy would have seen)."""
    return {
        "jsonrpc": "2.0",
        "id": call_id,
        "method": method,
        "params": {"name": tool, "arguments": arguments},
    }


def str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class _UnrepresentableNumber(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    # NaN/Infinity are not JSON; accepting them would poison canonical dumps and JSON columns.
    raise _UnrepresentableNumber(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _UnrepresentableNumber(text)
    return value


def too_deep(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def load_json(data: bytes | str) -> tuple[Any, str | None]:
    """Strictly parse JSON: ``(value, None)`` or ``(None, reason)``; never raises.

    Reasons: ``invalid_utf8``, ``invalid_json``, ``unrepresentable_number`` (NaN, Infinity,
    1e999, integers beyond Python's digit limit), ``too_deep``.
    """
    fast = fastjson.loads_plain(data, MAX_JSON_DEPTH)
    if fast is not fastjson.NotPlain:
        return fast, None
    return load_json_stdlib(data)


def load_json_stdlib(data: bytes | str) -> tuple[Any, str | None]:
    """``load_json`` by the standard library alone (what orjson's result must equal)."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None, "invalid_utf8"
    else:
        text = data
    text = text.removeprefix("\ufeff")
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError:
        return None, "invalid_json"
    except ValueError:
        # _UnrepresentableNumber, or int() refusing a literal over sys.get_int_max_str_digits().
        return None, "unrepresentable_number"
    except RecursionError:
        return None, "too_deep"
    if too_deep(value, MAX_JSON_DEPTH):
        return None, "too_deep"
    return value, None


def jsonrpc_kind(message: Any) -> Literal["request", "notification", "response"] | None:
    """``request`` / ``notification`` / ``response`` for a JSON-RPC message, None if it is not one."""
    if not isinstance(message, dict):
        return None
    method = message.get("method")
    if isinstance(method, str):
        return "request" if "id" in message and message["id"] is not None else "notification"
    if "id" in message and ("result" in message or "error" in message):
        return "response"
    return None
