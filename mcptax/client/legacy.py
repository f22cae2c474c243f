"""The SDK-free fast path of a one-shot measurement: the exchange the SDK's ``Client`` has with a
stdio server, spoken directly, for servers of both protocol eras (a ``server/discover`` probe
answered by a modern server, or the ``initialize`` handshake that follows when the server does not
know the probe or names only handshake-era versions).

`mcp-tax measure` starts half a dozen servers at once; importing the SDK costs about 0.8 s of CPU
that those servers need to boot on a small machine. So the command asks every server here first
and loads the SDK only for the servers that leave the plain path.

Exactness comes from staying on one well-trodden path, and leaving it at the first doubt:

- the messages are byte for byte what the SDK sends on that path (the probe, ``initialize``, the
  ``initialized`` notification, ``tools/list`` with its cursor); a test records both clients
  against the same servers and compares, and checks the constants below against the SDK's;
- anything else (a modern server that does not offer the probed version, a server that asks the
  client something, sends a line that is not JSON or a result of a shape the SDK might refuse,
  closes its output) returns ``None``: the caller stops this server and measures it again through the
  SDK, which then speaks for it, errors included. Only a timeout or an oversize answer ends here,
  with the SDK path's outcome.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any, TypeGuard

import anyio
import anyio.abc

from mcptax.client.target import (
    ENVELOPE_SLACK_BYTES,
    MAX_PAGES,
    FetchResult,
    PollError,
    canonical_bytes,
    message_too_large,
    payload_too_large,
    repeated_cursor,
    too_many_pages,
)
from mcptax.procgroup import stop_process_group_async, untrack_group

# The SDK's: the version its probe proposes, the newest handshake version, the versions its
# handshake accepts back, and the client it introduces itself as (tests compare them with the SDK).
PROBE_VERSION = "2026-07-28"
MODERN_VERSIONS = ("2026-07-28",)
HANDSHAKE_VERSION = "2025-11-25"
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
CLIENT_INFO = {"name": "mcp", "version": "0.1.0"}
_META = "io.modelcontextprotocol/"
UNSUPPORTED_PROTOCOL_VERSION = -32022

# A tool's fields and the JSON types the fast path accepts for them; a tool with another type in
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


class _OffPath(Exception):
    """The exchange left the path this module speaks: the SDK takes over."""


def _tool_is_plain(tool: Any) -> bool:
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


def _info_is_plain(info: Any) -> bool:
    """A server's name, version and (optional) title, each a string."""
    return (
        isinstance(info, dict)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str)
        and isinstance(info.get("title", ""), str)
    )


def _handshake_is_plain(result: Any) -> TypeGuard[dict[str, Any]]:
    if not isinstance(result, dict) or result.get("protocolVersion") not in HANDSHAKE_VERSIONS:
        return False
    if not _info_is_plain(result.get("serverInfo")):
        return False
    return isinstance(result.get("capabilities"), dict) and isinstance(result.get("instructions", ""), str)


class _Exchange:
    def __init__(self, process: anyio.abc.Process, max_bytes: int) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.stderr = process.stderr
        self.max_bytes = max_bytes
        self.limit = max_bytes + ENVELOPE_SLACK_BYTES
        self.buffer = bytearray()
        self.next_id = 1
        self.waiting_for = "its first answer"

    async def send(self, method: str, params: dict[str, Any] | None = None, *, notify: bool = False) -> int:
        message: dict[str, Any] = {"jsonrpc": "2.0"}
        request_id = 0
        if not notify:
            request_id = self.next_id
            self.next_id += 1
            message["id"] = request_id
            self.waiting_for = method
        message["method"] = method
        if params is not None:
            message["params"] = params
        try:
            await self.stdin.send(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise _OffPath from exc
        return request_id

    async def _line(self) -> bytes:
        while (newline := self.buffer.find(b"\n")) < 0:
            if len(self.buffer) > self.limit:
                raise message_too_large(len(self.buffer), self.waiting_for, self.max_bytes, self.limit)
            try:
                self.buffer += await self.stdout.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise _OffPath from exc
        line = bytes(self.buffer[:newline])
        del self.buffer[: newline + 1]
        if len(line) > self.limit:
            raise message_too_large(len(line), self.waiting_for, self.max_bytes, self.limit)
        return line

    async def answer(self, request_id: int) -> dict[str, Any]:
        """The answer to `request_id`; notifications in between are passed over, as the SDK does."""
        while True:
            line = await self._line()
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError as exc:
                raise _OffPath from exc
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                raise _OffPath
            if "method" in message:
                if "id" in message:
                    raise _OffPath  # the server asks something: the SDK knows how to answer
                continue
            if message.get("id") != request_id or ("result" in message) == ("error" in message):
                raise _OffPath
            return message


async def fetch_handshake_era(
    process: anyio.abc.Process, *, timeout: float, max_bytes: int
) -> FetchResult | None:
    """Every ``tools/list`` page of the server running as `process` (either era: the name is
    historical), or ``None`` when the SDK must speak for it. The server is stopped and reaped here either way."""
    started = time.monotonic()
    exchange = _Exchange(process, max_bytes)
    try:
        with anyio.fail_after(timeout):
            return await _exchange(exchange, started)
    except TimeoutError:
        raise PollError(
            "timeout", f"no answer to {exchange.waiting_for} within the timeout ({timeout:g} s)"
        ) from None
    except _OffPath:
        return None
    finally:
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await exchange.stdin.aclose()
            await stop_process_group_async(process, term_grace=1.0, kill_grace=2.0)
        untrack_group(process.pid)


async def _exchange(exchange: _Exchange, started: float) -> FetchResult:
    outcome: FetchResult | Exception
    async with anyio.create_task_group() as group:
        group.start_soon(_drain, exchange)  # a server blocked on a full stderr pipe never answers
        try:
            outcome = await _talk(exchange, started)
        except (_OffPath, PollError) as exc:
            outcome = exc  # raised below, out of the task group (which would wrap it in a group)
        group.cancel_scope.cancel()
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


def _stamp() -> dict[str, Any]:
    """The envelope every request of the modern era carries (the probe's, and each one after)."""
    return {
        "_meta": {
            _META + "protocolVersion": PROBE_VERSION,
            _META + "clientInfo": CLIENT_INFO,
            _META + "clientCapabilities": {},
        }
    }


def _discovery_is_plain(result: dict[str, Any]) -> bool:
    info = (
        result.get("_meta", {}).get(_META + "serverInfo") if isinstance(result.get("_meta"), dict) else None
    )
    if info is not None and not _info_is_plain(info):
        return False
    return (
        isinstance(result.get("capabilities"), dict)
        and result.get("resultType", "complete") == "complete"
        and isinstance(result.get("instructions", ""), str)
    )


async def _talk(exchange: _Exchange, started: float) -> FetchResult:
    answer = await exchange.answer(await exchange.send("server/discover", _stamp()))
    discovery = answer.get("result")
    if discovery is not None:
        versions = discovery.get("supportedVersions") if isinstance(discovery, dict) else None
        if not isinstance(versions, list):
            raise _OffPath
        if any(version in MODERN_VERSIONS for version in versions):
            # A server of the modern era: no handshake, every request carries the envelope.
            if PROBE_VERSION not in versions or not _discovery_is_plain(discovery):
                raise _OffPath
            pages = await _pages(exchange, modern=True)
            info = discovery.get("_meta", {}).get(_META + "serverInfo") or {}
            return _result(discovery, PROBE_VERSION, info, pages, started)
        # It answers the probe but names only versions of the handshake era: the handshake follows.
    else:
        refusal = answer["error"]
        if not isinstance(refusal, dict) or refusal.get("code") == UNSUPPORTED_PROTOCOL_VERSION:
            raise _OffPath  # it names the versions it speaks, or refused in a shape of its own
    handshake = (
        await exchange.answer(
            await exchange.send(
                "initialize",
                {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO},
            )
        )
    ).get("result")
    if not _handshake_is_plain(handshake):
        raise _OffPath
    await exchange.send("notifications/initialized", notify=True)
    pages = await _pages(exchange, modern=False)
    return _result(handshake, handshake["protocolVersion"], handshake["serverInfo"], pages, started)


def _result(
    handshake: dict[str, Any], version: str, info: dict[str, Any], pages: list[dict[str, Any]], started: float
) -> FetchResult:
    return FetchResult(
        tools=[tool for page in pages for tool in page["tools"]],
        server_name=info.get("name"),
        server_version=info.get("version"),
        server_title=info.get("title"),
        protocol_version=version,
        instructions=handshake.get("instructions"),
        prompts_count=None,
        resources_count=None,
        pages=len(pages),
        payload_bytes=sum(len(canonical_bytes(page)) for page in pages),
        raw_pages=pages,
        handshake=handshake,
        elapsed_seconds=time.monotonic() - started,
    )


async def _pages(exchange: _Exchange, *, modern: bool) -> list[dict[str, Any]]:
    pages: list[dict[str, Any]] = []
    total = 0
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        params: dict[str, Any] | None = _stamp() if modern else None
        if cursor is not None:
            params = (params or {}) | {"cursor": cursor}
        page = (await exchange.answer(await exchange.send("tools/list", params))).get("result")
        if not isinstance(page, dict) or not isinstance(page.get("tools"), list):
            raise _OffPath
        if modern and page.get("resultType", "complete") != "complete":
            raise _OffPath
        if not all(_tool_is_plain(tool) for tool in page["tools"]):
            raise _OffPath
        size = len(canonical_bytes(page))
        total += size
        if total > exchange.max_bytes:
            raise payload_too_large(total, len(pages) + 1, size, exchange.max_bytes)
        pages.append(page)
        cursor = page.get("nextCursor")
        if cursor is None or cursor == "":
            return pages
        if not isinstance(cursor, str):
            raise _OffPath
        if cursor in seen:
            raise repeated_cursor(cursor)
        seen.add(cursor)
    raise too_many_pages()


async def _drain(exchange: _Exchange) -> None:
    if exchange.stderr is None:
        return
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        async for _chunk in exchange.stderr:
            pass
