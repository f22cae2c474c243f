"""Streamable HTTP mode: a logging reverse proxy in front of one MCP endpoint.

Requests are relayed with their headers (Mcp-Session-Id included) and bodies unchanged;
responses, JSON or `text/event-stream`, are streamed back chunk by chunk as they arrive
and each SSE event is logged as its own s2c frame after its bytes were passed on.

Path mapping: a request to `/` goes to the upstream URL as given; any other path goes to
that path on the upstream's origin (so clients may use the upstream's own path, e.g. `/mcp`,
and OAuth discovery under `/.well-known/` still reaches the server).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import os
import re
import signal
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

import anyio
import httpx
import uvicorn

from mcptax.proxy.writer import PROXY_VERSION, EnvelopeWriter, new_session_id, rfc3339_now, warn

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

SESSION_HEADER = "mcp-session-id"
# Hop-by-hop headers (RFC 9110 §7.6.1) belong to one connection and are never forwarded.
# Bytes, because ASGI scopes and httpx's raw headers carry names as bytes.
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
# The log keeps at most this much of one request or non-SSE response body; the peer always gets all
# of it. A longer request is logged as a `truncated` frame: its first LOGGED_PREFIX bytes (id,
# method, tool name and the head of the arguments) with the whole body's sha256 and size.
MAX_LOGGED_BODY = 64 * 1024 * 1024
LOGGED_PREFIX = 1024 * 1024
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


class SseEventParser:
    """Incremental `text/event-stream` parser that yields each event's data (bytes).

    Events without data (e.g. the id-only priming event servers send for resumability)
    carry no JSON-RPC message and are skipped.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._data: list[bytes] = []
        self._has_data = False

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk
        events: list[bytes] = []
        pos = 0
        while True:
            match = _LINE_BREAK.search(self._buffer, pos)
            if match is None:
                break
            # A CR at the very end may be the first half of a CRLF: wait for the next chunk.
            if match.group() == b"\r" and match.end() == len(self._buffer):
                break
            line = bytes(self._buffer[pos : match.start()])
            pos = match.end()
            event = self._line(line)
            if event is not None:
                events.append(event)
        if pos:
            del self._buffer[:pos]
        return events

    def _line(self, line: bytes) -> bytes | None:
        if not line:
            if not self._has_data:
                return None
            data = b"\n".join(self._data)
            self._data.clear()
            self._has_data = False
            return data
        if line.startswith(b":"):
            return None
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._has_data = True
        return None


def _upstream_target(upstream: httpx.URL, scope: Scope) -> httpx.URL:
    path: str = scope.get("path") or "/"
    if path == "/":
        query = scope.get("query_string") or b""
        if query:
            return upstream.copy_with(query=query)
        return upstream
    raw_path: bytes = scope.get("raw_path") or path.encode()
    query = scope.get("query_string") or b""
    return upstream.copy_with(raw_path=raw_path + (b"?" + query if query else b""))


def _forward_request_headers(scope: Scope) -> list[tuple[bytes, bytes]]:
    headers = []
    for name, value in scope.get("headers", []):
        lower = name.lower()
        # Content-Length is kept: a streamed body is relayed with the framing the client chose.
        if lower in HOP_BY_HOP or lower in (b"host", b"accept-encoding"):
            continue
        headers.append((name, value))
    # Identity encoding keeps the bytes we log readable without re-encoding what we relay.
    headers.append((b"accept-encoding", b"identity"))
    return headers


def _relayed_response_headers(raw: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(name, value) for name, value in raw if name.lower() not in HOP_BY_HOP]


def _header(scope: Scope, wanted: bytes) -> str | None:
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for name, value in headers:
        if name.lower() == wanted:
            return value.decode("latin-1")
    return None


class LoggingReverseProxy:
    """ASGI app relaying every request to `upstream` and logging its JSON-RPC frames."""

    def __init__(self, upstream: str, writer: EnvelopeWriter, fallback_session_id: str) -> None:
        self.upstream = httpx.URL(upstream)
        self.writer = writer
        # Frames outside any Mcp-Session-Id (stateless servers, the initialize request
        # before the server names a session) are logged under the proxy run's id.
        self.fallback_session_id = fallback_session_id
        self._conn_ids = itertools.count(1)
        self._client: httpx.AsyncClient | None = None

    def _http_client(self) -> httpx.AsyncClient:
        if self._client is None:
            # No read timeout: an SSE stream may stay quiet for as long as the session lives.
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(30.0, read=None, pool=None), follow_redirects=False, trust_env=False
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        conn_id = str(next(self._conn_ids))
        request_ts = rfc3339_now()
        body = RequestBody(receive)
        if not await body.start():
            return
        async with anyio.create_task_group() as group:
            group.start_soon(_cancel_on_disconnect, body, group.cancel_scope)
            await self._exchange(scope, body, request_ts, conn_id, send)
            group.cancel_scope.cancel()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _log_request(
        self, session_id: str, scope: Scope, body: RequestBody, ts: str, conn_id: str, status: int
    ) -> None:
        if body.truncated:
            extra = {"truncated": True, "body_sha256": body.sha256.hexdigest(), "body_bytes": body.size}
            text = body.kept.decode("utf-8", "ignore")
            self.writer.record(session_id, "c2s", text=text, conn_id=conn_id, ts=ts, extra=extra)
        elif body.kept:
            self.writer.record(session_id, "c2s", bytes(body.kept), conn_id=conn_id, ts=ts)
        else:
            meta = {
                "event": "http_request",
                "method": scope["method"],
                "path": scope.get("path"),
                "status": status,
            }
            self.writer.record(session_id, "meta", meta=meta, conn_id=conn_id, ts=ts)

    async def _exchange(
        self, scope: Scope, body: RequestBody, request_ts: str, conn_id: str, send: Send
    ) -> None:
        client = self._http_client()
        request = client.build_request(
            scope["method"],
            _upstream_target(self.upstream, scope),
            headers=_forward_request_headers(scope),
            # Streamed: the upstream gets each chunk as it arrives, never the whole body at once.
            content=body.content(),
        )
        request_session = _header(scope, SESSION_HEADER.encode())
        try:
            response = await client.send(request, stream=True)
        except ClientGone:
            return
        except httpx.HTTPError as exc:
            session_id = request_session or self.fallback_session_id
            self._log_request(session_id, scope, body, request_ts, conn_id, 502)
            error = {"event": "upstream_error", "error": f"{type(exc).__name__}: {exc}"}
            self.writer.record(session_id, "meta", meta=error, conn_id=conn_id)
            warn(f"upstream {self.upstream} unreachable: {exc}")
            await _plain_response(send, 502, b"mcp-tax-proxy: upstream unreachable\n")
            return
        try:
            session_id = request_session or response.headers.get(SESSION_HEADER) or self.fallback_session_id
            self._log_request(session_id, scope, body, request_ts, conn_id, response.status_code)
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": _relayed_response_headers(response.headers.raw),
                }
            )
            await self._relay_body(response, session_id, conn_id, send)
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()

    async def _relay_body(self, response: httpx.Response, session_id: str, conn_id: str, send: Send) -> None:
        content_type = response.headers.get("content-type", "").lower()
        extra = {"http_status": response.status_code}
        if content_type.startswith("text/event-stream"):
            parser = SseEventParser()
            async for chunk in response.aiter_raw():
                # Logged before it is passed on: a request it prompts is then logged after it.
                for data in parser.feed(chunk):
                    self.writer.record(session_id, "s2c", data, conn_id=conn_id, extra=extra)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        kept = bytearray()
        truncated = False
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if len(kept) + len(chunk) <= MAX_LOGGED_BODY:
                kept += chunk
            else:
                truncated = True
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        if truncated:
            self.writer.record(session_id, "s2c", conn_id=conn_id, extra={**extra, "truncated": True})
        elif kept.strip():
            self.writer.record(session_id, "s2c", bytes(kept), conn_id=conn_id, extra=extra)


class ClientGone(Exception):
    """The client hung up before it had sent its whole request body."""


class RequestBody:
    """The client's request body, passed to the upstream chunk by chunk as it arrives.

    What the log needs is kept on the way: the whole body up to MAX_LOGGED_BODY; past that only
    its first LOGGED_PREFIX bytes, with the sha256 and size of all of it (a `truncated` frame).
    """

    def __init__(self, receive: Receive) -> None:
        self.receive = receive
        self.kept = bytearray()
        self.size = 0
        self.sha256 = hashlib.sha256()
        self.truncated = False
        self.complete = anyio.Event()
        self._first = b""
        self._more = False

    async def start(self) -> bool:
        """Read the first chunk; False when the client hung up before sending it."""
        message = await self.receive()
        if message["type"] == "http.disconnect":
            return False
        self._first = message.get("body", b"")
        self._more = bool(message.get("more_body", False))
        self._keep(self._first)
        if not self._more:
            self.complete.set()
        return True

    def content(self) -> bytes | AsyncIterator[bytes]:
        # A body that came in one piece (most JSON-RPC messages, and every GET) goes on as bytes,
        # so the upstream sees the same Content-Length framing the client used.
        return self._chunks() if self._more else self._first

    async def _chunks(self) -> AsyncIterator[bytes]:
        try:
            yield self._first
            self._first = b""
            while True:
                message = await self.receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone
                chunk: bytes = message.get("body", b"")
                if chunk:
                    self._keep(chunk)
                    yield chunk
                if not message.get("more_body", False):
                    return
        finally:
            self.complete.set()

    def _keep(self, chunk: bytes) -> None:
        self.size += len(chunk)
        self.sha256.update(chunk)
        if self.truncated:
            return
        if self.size <= MAX_LOGGED_BODY:
            self.kept += chunk
            return
        self.truncated = True
        del self.kept[LOGGED_PREFIX:]


async def _cancel_on_disconnect(body: RequestBody, scope: anyio.CancelScope) -> None:
    # Without this a client that hangs up on a quiet SSE stream would leave the
    # upstream stream (and this task) open until the server next speaks. The body's own reader
    # owns `receive` until the body is complete.
    await body.complete.wait()
    while True:
        message = await body.receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


async def _plain_response(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def parse_listen(value: str) -> tuple[str, int]:
    """'127.0.0.1:8080' or '[::1]:8080' -> (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--listen wants HOST:PORT with a port from 1 to 65535, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


class ListenError(Exception):
    """The address to listen on cannot be had (in use, not ours, not an address)."""


def bind_listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, before anything says "listening"."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def run_http(listen: str, upstream: str, writer: EnvelopeWriter, session_id: str | None = None) -> int:
    """Serve the proxy until SIGINT/SIGTERM; returns the process exit status.

    Raises ListenError when the address cannot be bound (nothing is logged as started then)."""
    host, port = parse_listen(listen)
    sock = bind_listen(host, port)
    run_id = session_id or new_session_id()
    proxy = LoggingReverseProxy(upstream, writer, run_id)
    start = {
        "event": "start",
        "mode": "http",
        "listen": f"{host}:{port}",
        "upstream": upstream,
        "proxy_pid": os.getpid(),
        "proxy_version": PROXY_VERSION,
    }
    writer.record(run_id, "meta", meta=start)
    config = uvicorn.Config(
        proxy,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    warn(f"listening on http://{host}:{port}/ -> {upstream}")
    # uvicorn re-raises the signal that stopped it once it has shut down, and another may follow
    # while the log is written: from here on a stop signal has nothing left to do. Left in place
    # until the process exits.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda _signum, _frame: None)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(server.serve(sockets=[sock]))
    status = 0 if server.started else 1
    writer.record(run_id, "meta", meta={"event": "exit", "exit_code": status})
    return status
