"""The poller's MCP client: fetch a server's complete ``tools/list``, exactly as the server sent it.

Everything protocol-level goes through the official SDK (``mcp.Client``: version negotiation with
the ``server/discover`` probe and ``initialize`` fallback, JSON-RPC dispatch, pagination calls).
Two things are added around it, both through the SDK's public ``Transport`` seam:

- A tap on the transport's streams records the raw JSON-RPC ``result`` of every ``tools/list``
  answer, before the SDK turns it into pydantic models, because the snapshot identity is the
  sha256 of exactly what the server sent (key order, unknown keys and all).
- Byte limits, so an unbounded or hostile server cannot exhaust the worker's memory: the stdio
  transport is our own (the SDK's reads a line of any length), bounded per message, and HTTP
  responses are read through a byte-counting httpx transport. Over-size input is refused, never
  truncated.

The stdio transport starts the server in its own process group and, whatever happens (success,
error, timeout, caller cancellation), closes its stdin, then SIGTERMs and finally SIGKILLs the
group, and reaps the child.

This module must not import Django.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import anyio
import anyio.abc
import httpx2
import mcp_types
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from mcptax.tokens import canonical

Transport = Literal["stdio", "http", "sse"]
Outcome = Literal["timeout", "refused_too_large", "protocol_error", "connect_error", "crashed"]
OUTCOMES: tuple[str, ...] = get_args(Outcome)

# One message may carry a little more than the tools themselves (JSON-RPC envelope, _meta), so the
# transports allow this much above max_bytes; the exact limit is applied to the tools/list results.
ENVELOPE_SLACK_BYTES = 256 * 1024
# A legacy SSE connection carries the whole session on one response; allow the handshake and the
# prompts/resources listings on top of the tools.
SSE_STREAM_SLACK_BYTES = 4 * 1024 * 1024
MAX_PAGES = 1000
STDERR_TAIL_BYTES = 2048
PREVIEW_CHARS = 120

# Shutdown of a stdio server, in seconds: after stdin closes, after SIGTERM, after SIGKILL.
STDIN_CLOSE_GRACE = 0.5
SIGTERM_GRACE = 1.0
SIGKILL_GRACE = 2.0
# How long a crashed server may take to report its exit status, for the error message.
EXIT_STATUS_WAIT = 0.5


class PollError(Exception):
    """A poll that produced no snapshot. ``outcome`` is one of ``OUTCOMES``."""

    def __init__(self, outcome: Outcome, message: str) -> None:
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown poll outcome {outcome!r}")
        super().__init__(f"{outcome}: {message}")
        self.outcome: Outcome = outcome
        self.message = message


@dataclass
class ServerTarget:
    """How to reach one MCP server."""

    transport: Transport
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.transport not in get_args(Transport):
            raise ValueError(f"unknown transport {self.transport!r}")
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio target needs a command")
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"an {self.transport} target needs a url")

    def describe(self) -> str:
        if self.transport == "stdio":
            return " ".join([self.command, *self.args])
        return self.url


@dataclass
class FetchResult:
    """One successful fetch. ``tools`` are the raw tool objects, all pages, in server order."""

    tools: list[dict[str, Any]]
    server_name: str | None
    server_version: str | None
    server_title: str | None
    protocol_version: str
    instructions: str | None
    prompts_count: int | None
    resources_count: int | None
    pages: int
    payload_bytes: int
    # The raw ``tools/list`` results (one per page) and the raw initialize/discover result.
    raw_pages: list[dict[str, Any]] = field(default_factory=list)
    handshake: dict[str, Any] | None = None
    elapsed_seconds: float = 0.0


def canonical_bytes(value: Any) -> bytes:
    """The compact JSON a client sends (docs/definitions.md, ``canonical``), as UTF-8."""
    return canonical(value).encode("utf-8")


def _preview(data: bytes | str) -> str:
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    return text[:PREVIEW_CHARS] + ("..." if len(text) > PREVIEW_CHARS else "")


class _Capture:
    """What the stream tap saw: pending requests, raw tools/list pages, and the first fault."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.pending: dict[Any, str] = {}
        self.pages: list[dict[str, Any]] = []
        self.payload_bytes = 0
        self.handshake: dict[str, Any] | None = None
        self.fault: PollError | None = None

    def set_fault(self, error: PollError) -> None:
        # The first fault is the cause; later ones are consequences of the teardown it started.
        if self.fault is None:
            self.fault = error

    def waiting_for(self) -> str:
        methods = sorted(set(self.pending.values()))
        return " and ".join(methods) if methods else "its first answer"

    def outgoing(self, message: mcp_types.JSONRPCMessage) -> None:
        if isinstance(message, mcp_types.JSONRPCRequest):
            self.pending[message.id] = message.method

    def incoming(self, message: mcp_types.JSONRPCMessage) -> None:
        if isinstance(message, mcp_types.JSONRPCError):
            self.pending.pop(message.id, None)
            return
        if not isinstance(message, mcp_types.JSONRPCResponse):
            return
        method = self.pending.pop(message.id, None)
        if method in ("initialize", "server/discover"):
            self.handshake = message.result
        elif method == "tools/list":
            size = len(canonical_bytes(message.result))
            self.payload_bytes += size
            if self.payload_bytes > self.max_bytes:
                self.set_fault(
                    PollError(
                        "refused_too_large",
                        f"tools/list payload is {self.payload_bytes} bytes after {len(self.pages) + 1} "
                        f"page(s) (this page {size} bytes); the limit is {self.max_bytes} bytes",
                    )
                )
                return
            self.pages.append(message.result)


class _ReadTap:
    """Read side of the tap: records answers and ends the stream once a fault is known."""

    def __init__(self, inner: Any, capture: _Capture) -> None:
        self._inner = inner
        self._capture = capture

    @property
    def last_context(self) -> Any:
        # The SDK's dispatcher looks for this on context-carrying streams (HTTP transports).
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        if self._capture.fault is not None:
            raise anyio.EndOfStream
        item = await self._inner.receive()
        if isinstance(item, Exception):
            self._capture.set_fault(
                PollError("protocol_error", f"unreadable message from the server: {_preview(str(item))}")
            )
        else:
            self._capture.incoming(item.message)
        if self._capture.fault is not None:
            # Ending the stream makes the SDK fail every pending request at once, instead of
            # waiting for the timeout; the recorded fault then names the real cause.
            raise anyio.EndOfStream
        return item

    def __aiter__(self) -> _ReadTap:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _ReadTap:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class _WriteTap:
    def __init__(self, inner: Any, capture: _Capture) -> None:
        self._inner = inner
        self._capture = capture

    async def send(self, item: SessionMessage, /) -> None:
        self._capture.outgoing(item.message)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WriteTap:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class _TappedTransport:
    """An ``mcp.client`` Transport that wraps another one's streams in the tap."""

    def __init__(self, inner: AbstractAsyncContextManager[Any], capture: _Capture) -> None:
        self._inner = inner
        self._capture = capture

    async def __aenter__(self) -> tuple[_ReadTap, _WriteTap]:
        read_stream, write_stream = await self._inner.__aenter__()
        return _ReadTap(read_stream, self._capture), _WriteTap(write_stream, self._capture)

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._inner.__aexit__(*exc_info)


# --------------------------------------------------------------------------------------------
# stdio


async def _wait_for_exit(process: anyio.abc.Process, timeout: float) -> bool:
    # Polling, not process.wait(): asyncio's wait also waits for the pipes to close, which a
    # surviving grandchild holding them would delay indefinitely.
    deadline = anyio.current_time() + timeout
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(0.01)
    return True


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


async def _stop_process_group(process: anyio.abc.Process) -> None:
    """Close stdin, then SIGTERM, then SIGKILL the server's process group; reap the server."""
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        if process.stdin is not None:
            await process.stdin.aclose()
    if not await _wait_for_exit(process, STDIN_CLOSE_GRACE):
        _signal_group(process.pid, signal.SIGTERM)
        if not await _wait_for_exit(process, SIGTERM_GRACE):
            _signal_group(process.pid, signal.SIGKILL)
            await _wait_for_exit(process, SIGKILL_GRACE)
    # Helpers the server started in its group must not outlive the poll either.
    _signal_group(process.pid, signal.SIGKILL)
    with anyio.move_on_after(SIGKILL_GRACE):
        await process.aclose()


@asynccontextmanager
async def _bounded_stdio(
    target: ServerTarget, capture: _Capture, message_limit: int
) -> AsyncIterator[tuple[Any, Any]]:
    env = get_default_environment() | dict(target.env)
    try:
        process = await anyio.open_process(
            [target.command, *target.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=target.cwd,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        raise PollError("connect_error", f"cannot start {target.command!r}: {exc}") from exc

    to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](16)
    stderr_tail = bytearray()
    stderr_done = anyio.Event()
    shutting_down = False

    def crash_message(what: str) -> str:
        code = process.returncode
        status = f"exited with code {code}" if code is not None else "is still running"
        tail = bytes(stderr_tail).decode("utf-8", errors="replace").strip()
        return f"{what} while waiting for {capture.waiting_for()}; the process {status}" + (
            f"; stderr ends: {tail[-500:]}" if tail else ""
        )

    async def deliver(line: bytes) -> bool:
        if not line.strip():
            return True
        if len(line) > message_limit:
            capture.set_fault(_too_large_message(len(line), capture, message_limit))
            return False
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            capture.set_fault(
                PollError(
                    "protocol_error",
                    f"the server wrote a line that is not a JSON-RPC message while answering "
                    f"{capture.waiting_for()}: {_preview(line)!r}",
                )
            )
            return False
        await to_session.send(SessionMessage(message))
        return True

    async def pump_stdout() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        scan_from = 0
        async with to_session:
            try:
                async for chunk in process.stdout:
                    buffer += chunk
                    while (newline := buffer.find(b"\n", scan_from)) >= 0:
                        line = bytes(buffer[:newline])
                        del buffer[: newline + 1]
                        scan_from = 0
                        if not await deliver(line):
                            return
                    scan_from = len(buffer)
                    if len(buffer) > message_limit:
                        # Stop reading now: the rest of this message is never buffered.
                        capture.set_fault(_too_large_message(len(buffer), capture, message_limit))
                        return
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            if shutting_down:
                return
            await _wait_for_exit(process, EXIT_STATUS_WAIT)
            # Its last words on stderr are the most useful part of a crash report.
            with anyio.move_on_after(EXIT_STATUS_WAIT):
                await stderr_done.wait()
            if buffer.strip():
                what = f"the server stopped in the middle of a message ({len(buffer)} bytes unterminated)"
            else:
                what = "the server closed its output"
            capture.set_fault(PollError("crashed", crash_message(what)))

    async def pump_stderr() -> None:
        assert process.stderr is not None
        try:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for chunk in process.stderr:
                    stderr_tail.extend(chunk)
                    del stderr_tail[:-STDERR_TAIL_BYTES]
        finally:
            stderr_done.set()

    async def pump_stdin() -> None:
        assert process.stdin is not None
        async with from_session:
            async for item in from_session:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    await process.stdin.send(data.encode("utf-8"))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    if not shutting_down:
                        await _wait_for_exit(process, EXIT_STATUS_WAIT)
                        capture.set_fault(PollError("crashed", crash_message("the server stopped reading")))
                        await to_session.aclose()
                    return

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump_stdout)
            tg.start_soon(pump_stderr)
            tg.start_soon(pump_stdin)
            try:
                yield from_server, to_server
            finally:
                shutting_down = True
                # Shielded so that a timeout or a cancelled caller still stops and reaps the server.
                with anyio.CancelScope(shield=True):
                    await _stop_process_group(process)
                tg.cancel_scope.cancel()
    finally:
        # Only reached without the shielded stop if the task group failed to start.
        if process.returncode is None:
            with anyio.CancelScope(shield=True):
                await _stop_process_group(process)


def _too_large_message(size: int, capture: _Capture, message_limit: int) -> PollError:
    return PollError(
        "refused_too_large",
        f"a message from the server passed {message_limit} bytes ({size} read) while answering "
        f"{capture.waiting_for()}; tools/list may be at most {capture.max_bytes} bytes (plus "
        f"{message_limit - capture.max_bytes} bytes of envelope); refused without reading the rest",
    )


# --------------------------------------------------------------------------------------------
# HTTP (Streamable HTTP and legacy SSE)


class _ResponseTooLarge(httpx2.StreamError):
    # A StreamError so the SDK's JSON-response path turns it into an error for the pending request
    # instead of crashing its task group; the capture holds the real reason.
    pass


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, limit: int, capture: _Capture) -> None:
        self._inner = inner
        self._limit = limit
        self._capture = capture

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = 0
        async for chunk in self._inner:
            received += len(chunk)
            if received > self._limit:
                self._capture.set_fault(_too_large_message(received, self._capture, self._limit))
                raise _ResponseTooLarge(f"response exceeded {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedTransport(httpx2.AsyncBaseTransport):
    """Counts every response body's bytes as they arrive and stops reading past the limit."""

    def __init__(self, limit: int, capture: _Capture) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._limit = limit
        self._capture = capture

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_CappedStream(response.stream, self._limit, self._capture),
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def _http_headers(target: ServerTarget) -> dict[str, str]:
    # Uncompressed bodies, so the byte cap counts what is actually held in memory.
    return {"Accept-Encoding": "identity", **target.headers}


def _http_client(
    target: ServerTarget, capture: _Capture, limit: int, timeout: httpx2.Timeout
) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        headers=_http_headers(target), timeout=timeout, transport=_CappedTransport(limit, capture)
    )


@asynccontextmanager
async def _streamable_http(
    target: ServerTarget, capture: _Capture, message_limit: int, connect_timeout: float, total_timeout: float
) -> AsyncIterator[tuple[Any, Any]]:
    timeout = httpx2.Timeout(total_timeout, connect=connect_timeout)
    async with (
        _http_client(target, capture, message_limit, timeout) as http_client,
        streamable_http_client(
            target.url, http_client=http_client, max_sse_event_size=message_limit
        ) as streams,
    ):
        yield streams


def _sse(
    target: ServerTarget, capture: _Capture, message_limit: int, connect_timeout: float, total_timeout: float
) -> AbstractAsyncContextManager[Any]:
    stream_limit = message_limit + SSE_STREAM_SLACK_BYTES

    def factory(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers={**_http_headers(target), **(headers or {})},
            timeout=timeout,
            auth=auth,
            transport=_CappedTransport(stream_limit, capture),
        )

    return sse_client(
        target.url,
        headers=dict(target.headers),
        timeout=connect_timeout,
        sse_read_timeout=total_timeout,
        httpx_client_factory=factory,
    )


# --------------------------------------------------------------------------------------------
# classification of failures


def _leaf_exceptions(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        leaves: list[BaseException] = []
        for inner in exc.exceptions:
            leaves.extend(_leaf_exceptions(inner))
        return leaves
    return [exc]


def _classify(exc: BaseException, target: ServerTarget, capture: _Capture) -> PollError:
    """Map an SDK/transport failure to a poll outcome (a recorded fault has already won)."""
    leaves = _leaf_exceptions(exc)
    where = target.describe()
    for leaf in leaves:
        if isinstance(leaf, PollError):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, httpx2.TimeoutException | TimeoutError):
            return PollError("timeout", f"{where}: no answer to {capture.waiting_for()} ({leaf!r})")
        if isinstance(leaf, httpx2.ConnectError | ConnectionRefusedError):
            return PollError("connect_error", f"cannot connect to {where}: {leaf}")
        if isinstance(leaf, httpx2.HTTPStatusError):
            return PollError("connect_error", f"{where} answered HTTP {leaf.response.status_code}")
        if isinstance(leaf, httpx2.RemoteProtocolError | httpx2.ReadError | ConnectionError):
            return PollError("crashed", f"{where} dropped the connection while answering: {leaf}")
    for leaf in leaves:
        if isinstance(leaf, MCPError):
            code = leaf.error.code
            if code == mcp_types.CONNECTION_CLOSED:
                return PollError(
                    "crashed", f"{where}: connection closed before the answer to {capture.waiting_for()}"
                )
            if code == mcp_types.REQUEST_TIMEOUT:
                return PollError("timeout", f"{where}: {leaf.error.message}")
            return PollError(
                "protocol_error", f"{where} answered with JSON-RPC error {code}: {leaf.error.message}"
            )
        if isinstance(leaf, ValidationError):
            return PollError(
                "protocol_error", f"{where} sent an answer that does not fit the protocol: {leaf}"
            )
        if isinstance(leaf, httpx2.HTTPError):
            return PollError("connect_error", f"{where}: {leaf!r}")
    return PollError("protocol_error", f"{where}: unexpected failure {exc!r}")


# --------------------------------------------------------------------------------------------
# the fetch


async def _count_listing(list_page: Callable[..., Awaitable[Any]], attribute: str) -> int | None:
    total = 0
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        try:
            page = await list_page(cursor=cursor)
        except MCPError:
            return None  # advertised but not served: unknown, not zero
        total += len(getattr(page, attribute))
        cursor = page.next_cursor
        if not cursor or cursor in seen:
            return total
        seen.add(cursor)
    return total


def _validate_limits(connect_timeout: float, total_timeout: float, max_bytes: int) -> None:
    if connect_timeout <= 0 or total_timeout <= 0:
        raise ValueError("timeouts must be positive")
    if max_bytes <= 0:
        raise ValueError("max_bytes must be positive")


async def fetch_tools(
    target: ServerTarget,
    *,
    connect_timeout: float,
    total_timeout: float,
    max_bytes: int,
    include_prompts_resources: bool = True,
) -> FetchResult:
    """Connect, negotiate, fetch every ``tools/list`` page, and disconnect.

    ``connect_timeout`` bounds starting the server (or the TCP connect) plus the handshake;
    ``total_timeout`` bounds the whole exchange (stopping a stdio server may take up to a few
    seconds more, shielded). ``max_bytes`` bounds the sum of the raw ``tools/list`` results
    (``payload_bytes``). Prompts and resources are counted only when advertised, and only with
    the time left; a count that could not be taken is ``None``.

    Raises ``PollError`` with one of the outcomes in ``OUTCOMES``.
    """
    _validate_limits(connect_timeout, total_timeout, max_bytes)
    capture = _Capture(max_bytes)
    message_limit = max_bytes + ENVELOPE_SLACK_BYTES
    started = anyio.current_time()
    wall_started = time.monotonic()
    if target.transport == "stdio":
        inner: AbstractAsyncContextManager[Any] = _bounded_stdio(target, capture, message_limit)
    elif target.transport == "http":
        inner = _streamable_http(target, capture, message_limit, connect_timeout, total_timeout)
    else:
        inner = _sse(target, capture, message_limit, connect_timeout, total_timeout)

    result: FetchResult | None = None
    phase = "connect"
    scope = anyio.CancelScope(deadline=started + min(connect_timeout, total_timeout))
    try:
        with scope:
            async with Client(_TappedTransport(inner, capture), cache=None) as client:
                phase = "tools/list"
                # One scope for the whole exchange: the connect budget is spent, the rest of the
                # total budget now applies.
                scope.deadline = started + total_timeout
                result = await _list_all_tools(client, capture)
                result.handshake = capture.handshake
                if include_prompts_resources:
                    phase = "prompts/list and resources/list"
                    capabilities = client.server_capabilities
                    if capabilities.prompts is not None:
                        result.prompts_count = await _count_listing(client.list_prompts, "prompts")
                    if capabilities.resources is not None:
                        result.resources_count = await _count_listing(client.list_resources, "resources")
    except Exception as exc:
        # A failure after the tools arrived (counting prompts, tearing down) loses nothing.
        if result is None:
            if isinstance(exc, PollError):
                raise
            if capture.fault is not None:
                raise capture.fault from exc
            if scope.cancel_called:
                raise _timeout_error(phase, capture, connect_timeout, total_timeout) from exc
            raise _classify(exc, target, capture) from exc
    if result is None:
        if capture.fault is not None:
            raise capture.fault
        raise _timeout_error(phase, capture, connect_timeout, total_timeout)
    result.elapsed_seconds = time.monotonic() - wall_started
    return result


def _timeout_error(phase: str, capture: _Capture, connect_timeout: float, total_timeout: float) -> PollError:
    if phase == "connect":
        return PollError(
            "timeout",
            f"no answer to {capture.waiting_for()} within the connect timeout "
            f"({min(connect_timeout, total_timeout):g} s)",
        )
    return PollError(
        "timeout", f"no answer to {capture.waiting_for()} within the total timeout ({total_timeout:g} s)"
    )


async def _list_all_tools(client: Client, capture: _Capture) -> FetchResult:
    cursor: str | None = None
    seen: set[str] = set()
    for page_number in range(1, MAX_PAGES + 1):
        page = await client.list_tools(cursor=cursor)
        if capture.fault is not None:
            raise capture.fault
        if len(capture.pages) != page_number:
            raise PollError("protocol_error", "a tools/list answer was not seen on the wire")
        cursor = page.next_cursor
        if not cursor:
            break
        if cursor in seen:
            raise PollError(
                "protocol_error", f"tools/list repeated the cursor {cursor!r}; it would never end"
            )
        seen.add(cursor)
    else:
        raise PollError("protocol_error", f"tools/list did not end within {MAX_PAGES} pages")
    info = client.server_info
    return FetchResult(
        tools=[tool for raw_page in capture.pages for tool in raw_page.get("tools", [])],
        server_name=info.name if info else None,
        server_version=info.version if info else None,
        server_title=info.title if info else None,
        protocol_version=client.protocol_version,
        instructions=client.instructions,
        prompts_count=None,
        resources_count=None,
        pages=len(capture.pages),
        payload_bytes=capture.payload_bytes,
        raw_pages=list(capture.pages),
    )


def fetch_tools_sync(
    target: ServerTarget,
    *,
    connect_timeout: float,
    total_timeout: float,
    max_bytes: int,
    include_prompts_resources: bool = True,
) -> FetchResult:
    """``fetch_tools`` for synchronous callers (Celery tasks, management commands)."""
    call = functools.partial(
        fetch_tools,
        target,
        connect_timeout=connect_timeout,
        total_timeout=total_timeout,
        max_bytes=max_bytes,
        include_prompts_resources=include_prompts_resources,
    )
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(call)
    # Called from a thread that already runs an event loop (an async view, a notebook): a
    # private loop in a worker thread, since this loop cannot be re-entered.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, call).result()
