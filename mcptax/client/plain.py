"""The I/O-free part of the exchange the SDK's ``Client`` has with a server, written once for the
two fast paths that speak it without the SDK: stdio for ``mcp-tax measure`` (:mod:`.legacy`) and
Streamable HTTP for the poller (:mod:`.fasthttp`).

The exchange is a generator (:func:`tools_exchange`, :func:`count_listing`): it yields each
message to send (:class:`Send`) and is sent back the server's answer (the JSON-RPC message, a
dict with ``result`` or ``error``), so the transport that drives it owns every byte of I/O and
every timeout. The messages are the SDK's own (the probe, ``initialize``, the ``initialized``
notification, ``tools/list`` with its cursor, the listings), and so is every constant below (a
test compares them with the SDK's).

Exactness comes from staying on one well-trodden path and leaving it at the first doubt: anything
the SDK might read otherwise (a shape its models may refuse, a server that asks the client
something, a result type or version the path does not know) raises :class:`OffPath`, and the
caller hands the server to the SDK, which then speaks for it, errors included.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeGuard

from mcptax.client.target import (
    MAX_PAGES,
    FetchResult,
    canonical_bytes,
    payload_too_large,
    repeated_cursor,
    too_many_pages,
)

# The SDK's: the version its probe proposes, the newest handshake version, the versions its
# handshake accepts back, and the client it introduces itself as.
PROBE_VERSION = "2026-07-28"
MODERN_VERSIONS = ("2026-07-28",)
HANDSHAKE_VERSION = "2025-11-25"
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
CLIENT_INFO = {"name": "mcp", "version": "0.1.0"}
META = "io.modelcontextprotocol/"
UNSUPPORTED_PROTOCOL_VERSION = -32022
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603

# A tool's fields and the JSON types the fast paths accept for them; a tool with another type in
# one of these fields goes to the SDK, whose models decide (unknown fields pass, as in the SDK).
_TOOL_FIELDS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "title": str,
    "description": str,
    "inputSchema": dict,
    "outputSchema": dict,
    "annotations": dict,
    "icons": list,
    "execution": dict,
    "_meta": dict,
}
_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
# The prompts and resources a listing counts: the fields their models type, and the JSON types
# accepted for them here (a listing with another type goes to the SDK).
_LISTED_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "prompts": {"name": str, "title": str, "description": str, "arguments": list, "_meta": dict},
    "resources": {
        "name": str,
        "uri": str,
        "title": str,
        "description": str,
        "mimeType": str,
        "_meta": dict,
    },
}
_REQUIRED = {"prompts": ("name",), "resources": ("name", "uri")}


class OffPath(Exception):
    """The exchange left the path this module speaks: the SDK takes over."""


@dataclass(frozen=True)
class Send:
    """One message for the transport: a request (answered) or a notification (``notify``)."""

    method: str
    params: dict[str, Any] | None = None
    notify: bool = False


@dataclass
class Listed:
    """What the tools part of the exchange gathered."""

    handshake: dict[str, Any]
    version: str
    info: dict[str, Any]
    pages: list[dict[str, Any]]
    # The pages' canonical size in bytes, summed as they arrived (checked against the limit).
    payload_bytes: int

    @property
    def modern(self) -> bool:
        return self.version in MODERN_VERSIONS

    def advertised(self, kind: str) -> bool:
        """The server names ``kind`` (prompts, resources) among its capabilities."""
        capabilities = self.handshake.get("capabilities", {})
        value = capabilities.get(kind)
        if value is not None and not isinstance(value, dict):
            raise OffPath
        return value is not None


Exchange = Generator[Send, dict[str, Any] | None, Listed]


def message(request_id: int | None, send: Send) -> dict[str, Any]:
    """The JSON-RPC message for ``send`` (``request_id`` None for a notification)."""
    built: dict[str, Any] = {"jsonrpc": "2.0"}
    if request_id is not None:
        built["id"] = request_id
    built["method"] = send.method
    if send.params is not None:
        built["params"] = send.params
    return built


def encode(built: dict[str, Any]) -> bytes:
    """The bytes the SDK's HTTP client sends for a message (compact, UTF-8, no NaN)."""
    return json.dumps(built, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _refuse_constant(name: str) -> Any:
    raise OffPath  # NaN and Infinity: the SDK's parser refuses them


def decode(data: bytes | str, parse_float: Callable[[str], float] | None = None) -> Any:
    try:
        return json.loads(data, parse_constant=_refuse_constant, parse_float=parse_float)
    except ValueError as exc:
        raise OffPath from exc


class Reader:
    """Decodes one exchange's messages (as :func:`decode`) and remembers whether any number read
    was a float. Until one is, everything read is plain JSON by construction, and its canonical
    form can be written without checking (``tokens.canonical_utf8``)."""

    def __init__(self) -> None:
        self.floats = False

    def _float(self, text: str) -> float:
        self.floats = True
        return float(text)

    def decode(self, data: bytes | str) -> Any:
        return decode(data, self._float)


def answer_to(received: Any, request_id: int) -> dict[str, Any] | None:
    """``received`` as the answer to ``request_id``; None for a notification to pass over.

    A server that asks something, or a message the path does not read, raises OffPath."""
    if not isinstance(received, dict) or received.get("jsonrpc") != "2.0":
        raise OffPath
    if "method" in received:
        if "id" in received:
            raise OffPath  # the server asks something: the SDK knows how to answer
        return None
    if received.get("id") != request_id or ("result" in received) == ("error" in received):
        raise OffPath
    if "result" in received and not isinstance(received["result"], dict):
        raise OffPath
    return received


def tool_is_plain(tool: Any) -> bool:
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or "inputSchema" not in tool:
        return False
    for key, kind in _TOOL_FIELDS.items():
        if key in tool and not isinstance(tool[key], kind):
            return False
    for key in ("inputSchema", "outputSchema"):
        if key in tool and tool[key].get("type") != "object":
            return False
    annotations = tool.get("annotations", {})
    if "title" in annotations and not isinstance(annotations["title"], str):
        return False
    if any(hint in annotations and not isinstance(annotations[hint], bool) for hint in _HINTS):
        return False
    return all(isinstance(icon, dict) and isinstance(icon.get("src"), str) for icon in tool.get("icons", []))


def info_is_plain(info: Any) -> bool:
    """A server's name, version and (optional) title, each a string."""
    return (
        isinstance(info, dict)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str)
        and isinstance(info.get("title", ""), str)
    )


def handshake_is_plain(result: Any) -> TypeGuard[dict[str, Any]]:
    if not isinstance(result, dict) or result.get("protocolVersion") not in HANDSHAKE_VERSIONS:
        return False
    if not info_is_plain(result.get("serverInfo")):
        return False
    return isinstance(result.get("capabilities"), dict) and isinstance(result.get("instructions", ""), str)


def stamp() -> dict[str, Any]:
    """The envelope every request of the modern era carries (the probe's, and each one after)."""
    return {
        "_meta": {
            META + "protocolVersion": PROBE_VERSION,
            META + "clientInfo": CLIENT_INFO,
            META + "clientCapabilities": {},
        }
    }


def discovery_is_plain(result: dict[str, Any]) -> bool:
    info = result.get("_meta", {}).get(META + "serverInfo") if isinstance(result.get("_meta"), dict) else None
    if info is not None and not info_is_plain(info):
        return False
    return (
        isinstance(result.get("capabilities"), dict)
        and result.get("resultType", "complete") == "complete"
        and isinstance(result.get("instructions", ""), str)
    )


def _page_is_plain(page: Any, key: str, modern: bool) -> bool:
    """A listing page the SDK's models read as the path does (the cacheable result's fields too)."""
    if not isinstance(page, dict) or not isinstance(page.get(key), list):
        return False
    if modern and page.get("resultType", "complete") != "complete":
        return False
    ttl = page.get("ttlMs", 0)
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0:
        return False
    return page.get("cacheScope", "private") in ("public", "private")


def _params(modern: bool, cursor: str | None) -> dict[str, Any] | None:
    params: dict[str, Any] | None = stamp() if modern else None
    if cursor is not None:
        params = (params or {}) | {"cursor": cursor}
    return params


def _next_cursor(page: dict[str, Any], seen: set[str]) -> str | None:
    cursor = page.get("nextCursor")
    if cursor is None or cursor == "":
        return None
    if not isinstance(cursor, str):
        raise OffPath
    if cursor in seen:
        raise repeated_cursor(cursor)
    seen.add(cursor)
    return cursor


def _pages(
    max_bytes: int, modern: bool, reader: Reader | None
) -> Generator[Send, dict[str, Any] | None, tuple[list[dict[str, Any]], int]]:
    """Every tools/list page, and their canonical size in all."""
    pages: list[dict[str, Any]] = []
    total = 0
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        answer = yield Send("tools/list", _params(modern, cursor))
        page = (answer or {}).get("result")
        if not _page_is_plain(page, "tools", modern):
            raise OffPath
        assert isinstance(page, dict)
        if not all(tool_is_plain(tool) for tool in page["tools"]):
            raise OffPath
        size = len(canonical_bytes(page, float_free_json=reader is not None and not reader.floats))
        total += size
        if total > max_bytes:
            raise payload_too_large(total, len(pages) + 1, size, max_bytes)
        pages.append(page)
        cursor = _next_cursor(page, seen)
        if cursor is None:
            return pages, total
    raise too_many_pages()


def tools_exchange(mode: str, max_bytes: int, reader: Reader | None = None) -> Exchange:
    """Negotiate as the SDK does in ``mode`` (``auto``: the probe first; ``legacy``: the handshake
    only) and read every ``tools/list`` page. ``reader``: the one the transport decodes the answers
    with, when it uses one (then the pages' canonical sizes skip the plainness check while no
    float was read)."""
    if mode not in ("auto", "legacy"):
        raise OffPath
    if mode == "auto":
        answer = yield Send("server/discover", stamp())
        discovery = (answer or {}).get("result")
        if discovery is not None:
            versions = discovery.get("supportedVersions")
            if not isinstance(versions, list):
                raise OffPath
            if any(version in MODERN_VERSIONS for version in versions):
                # A server of the modern era: no handshake, every request carries the envelope.
                if PROBE_VERSION not in versions or not discovery_is_plain(discovery):
                    raise OffPath
                info = discovery.get("_meta", {}).get(META + "serverInfo") or {}
                pages, size = yield from _pages(max_bytes, True, reader)
                return Listed(discovery, PROBE_VERSION, info, pages, size)
            # It answers the probe but names only versions of the handshake era: the handshake follows.
        else:
            refusal = (answer or {}).get("error")
            if not isinstance(refusal, dict) or refusal.get("code") == UNSUPPORTED_PROTOCOL_VERSION:
                raise OffPath  # it names the versions it speaks, or refused in a shape of its own
    params = {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO}
    handshake = ((yield Send("initialize", params)) or {}).get("result")
    if not handshake_is_plain(handshake):
        raise OffPath
    yield Send("notifications/initialized", notify=True)
    pages, size = yield from _pages(max_bytes, False, reader)
    return Listed(handshake, handshake["protocolVersion"], handshake["serverInfo"], pages, size)


def _item_is_plain(item: Any, kind: str) -> bool:
    if not isinstance(item, dict) or not all(isinstance(item.get(key), str) for key in _REQUIRED[kind]):
        return False
    for key, expected in _LISTED_FIELDS[kind].items():
        if key in item and not isinstance(item[key], expected):
            return False
    if kind == "prompts":
        return all(
            isinstance(argument, dict) and isinstance(argument.get("name"), str)
            for argument in item.get("arguments", [])
        )
    return not any(key in item for key in ("size", "icons", "annotations"))


def count_listing(kind: str, modern: bool) -> Generator[Send, dict[str, Any] | None, int | None]:
    """Count a listing (``prompts`` or ``resources``) as the SDK's poller does: every page, None
    when the server refuses it (advertised but not served: unknown, not zero)."""
    total = 0
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        answer = yield Send(f"{kind}/list", _params(modern, cursor))
        if answer is not None and "error" in answer:
            return None
        page = (answer or {}).get("result")
        if not _page_is_plain(page, kind, modern):
            raise OffPath
        assert isinstance(page, dict)
        if not all(_item_is_plain(item, kind) for item in page[kind]):
            raise OffPath
        total += len(page[kind])
        cursor = page.get("nextCursor")
        if not cursor:
            return total
        if not isinstance(cursor, str):
            raise OffPath
        if cursor in seen:
            return total
        seen.add(cursor)
    return total


def result(listed: Listed, started: float, reader: Reader | None = None) -> FetchResult:
    """The fetch result of a finished exchange (the listings counted by the caller, if at all);
    ``reader`` as for :func:`tools_exchange`."""
    pages = listed.pages
    return FetchResult(
        tools=[tool for page in pages for tool in page["tools"]],
        server_name=listed.info.get("name"),
        server_version=listed.info.get("version"),
        server_title=listed.info.get("title"),
        protocol_version=listed.version,
        instructions=listed.handshake.get("instructions"),
        prompts_count=None,
        resources_count=None,
        pages=len(pages),
        payload_bytes=listed.payload_bytes,
        raw_pages=pages,
        handshake=listed.handshake,
        elapsed_seconds=time.monotonic() - started,
        float_free_json=reader is not None and not reader.floats,
    )


class SseEvents:
    """An incremental reader of ``text/event-stream`` bytes: feed chunks, get ``(event, data)``
    for each complete event (comments, ids and retry fields are read and dropped)."""

    def __init__(self, max_event_size: int) -> None:
        self._buffer = b""
        self._event = ""
        self._data: list[str] = []
        self._size = 0
        self._max = max_event_size

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        self._buffer += chunk
        events: list[tuple[str, str]] = []
        while True:
            cut = min((i for i in (self._buffer.find(b"\n"), self._buffer.find(b"\r")) if i >= 0), default=-1)
            if cut < 0:
                if len(self._buffer) > self._max:
                    raise OffPath
                return events
            if self._buffer[cut : cut + 1] == b"\r" and cut + 1 == len(self._buffer):
                return events  # a CR at the end of the chunk may be half of a CRLF
            line = self._buffer[:cut]
            skip = 2 if self._buffer[cut : cut + 2] == b"\r\n" else 1
            self._buffer = self._buffer[cut + skip :]
            event = self._line(line)
            if event is not None:
                events.append(event)

    def _line(self, raw: bytes) -> tuple[str, str] | None:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise OffPath from exc
        if not line:
            event = (self._event or "message", "\n".join(self._data)) if self._data else None
            self._event, self._data, self._size = "", [], 0
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._size += len(raw)
            if self._size > self._max:
                raise OffPath
            self._data.append(value)
        return None
