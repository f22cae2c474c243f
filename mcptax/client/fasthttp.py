"""The poller's Streamable HTTP fast path: the SDK's exchange (:mod:`.plain`) straight over
httpcore's connection pool (the layer under httpx), one pool per worker thread and origin.

The SDK's client runs every poll on an event loop with a task group, memory streams and pydantic
models, which is most of what a poll of an unchanged server costs. Here the same messages go out
as the same POSTs (the same headers: ``Accept``, ``Content-Type``, ``Accept-Encoding: identity``,
the server's own headers, the session id, ``MCP-Protocol-Version`` and ``Mcp-Method`` where the
SDK sends them, ending the session with ``DELETE``), under the same rules:

- every connection is opened by the outbound policy's pinned pool (resolve once, refuse
  inward addresses, connect to a checked one); a connection is kept for the next request only
  within the pool's keep-alive, to the same name, under the same policy;
- the server's headers (secrets included) go on each request only, never on the shared pool,
  and cookies live for one exchange, as in the SDK's client of one poll;
- each request's bytes are the ones the SDK's client sends (each header's name, case and order
  included): httpx still parses the URL and encodes the headers, once per exchange. What httpx's
  client layer adds per request (its request and response models, redirect, auth and cookie
  machinery, about 100 µs of CPU each, eight requests a poll) is left out; a cookie is handled
  here, only for a server that sets one;
- every response body is counted against the same limit as the SDK path's; the connect and total
  timeouts bound the same phases, and a timeout or an outbound refusal ends here with the SDK
  path's outcome and message.

Anything else leaves the path (:class:`plain.OffPath`) and :func:`fetch` returns None: a redirect,
an HTTP error, an unexpected content type, a server that asks the client something, a malformed
or oversize body, a failed connection, a shape the SDK's models might read otherwise. The caller
then polls the server through the SDK, which speaks for it, errors included.
"""

from __future__ import annotations

import contextlib
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Generator, Iterator
from typing import Any

import httpcore
import httpx

from mcptax.client import plain
from mcptax.client.target import (
    ENVELOPE_SLACK_BYTES,
    FetchResult,
    Listings,
    PollError,
    ServerTarget,
    wants_listings,
)
from mcptax.outbound import OutboundPolicy, OutboundRefused
from mcptax.outbound.transport import GraceStream, pinned_pool

# What the SDK's client says it is (httpx2's default), so a server sees the same request.
USER_AGENT = "python-httpx2/2.17.0"
MCP_SESSION_ID = "mcp-session-id"
MCP_PROTOCOL_VERSION = "mcp-protocol-version"
MCP_METHOD = "mcp-method"
# How long a read of a response's rest may wait once its answer is in hand. A server ends a
# stream right after the answer; one that keeps it open costs this wait once per exchange.
REST_GRACE_SECONDS = 0.2

# The pool's account of a failed exchange (httpcore's, as httpx maps them to its own).
TIMEOUT = httpcore.TimeoutException
DROPPED = (httpcore.RemoteProtocolError, httpcore.ReadError)
TRANSPORT_ERROR = (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError)

_local = threading.local()
# Each worker thread keeps one pool per origin (scheme, host, port) it polled lately. One pool per
# origin, because httpcore checks every idle connection of a pool on each request: a shared pool
# of many origins' connections makes every request pay for all of them. Past this many, the pool
# least recently used is closed.
POOLS_PER_THREAD = 32


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or ""), parts.port


def _pool(policy: OutboundPolicy, url: str) -> httpcore.ConnectionPool:
    """This thread's pool for ``url``'s origin under ``policy``: it keeps connections between
    requests and between polls."""
    pools: OrderedDict[tuple[OutboundPolicy, tuple[str, str, int | None]], httpcore.ConnectionPool]
    pools = _local.__dict__.setdefault("pools", OrderedDict())
    key = (policy, _origin(url))
    pool = pools.get(key)
    if pool is not None:
        pools.move_to_end(key)
        return pool
    pool = pools[key] = pinned_pool(policy)
    if len(pools) > POOLS_PER_THREAD:
        pools.popitem(last=False)[1].close()
    return pool


def close_pools() -> None:
    """Close this thread's pools (a process about to fork its worker slots owns none after)."""
    for pool in _local.__dict__.pop("pools", {}).values():
        pool.close()


def _header(response: httpcore.Response, name: bytes) -> str | None:
    """A response header's first value, decoded as httpx decodes it (names are case-insensitive)."""
    for key, value in response.headers:
        if key.lower() == name:
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError:
                return value.decode("iso-8859-1")
    return None


def _stamped(send: plain.Send) -> bool:
    """A request of the modern era (it carries the envelope, and the SDK names it in headers)."""
    meta = (send.params or {}).get("_meta")
    return isinstance(meta, dict) and plain.META + "protocolVersion" in meta


class _Deadline(Exception):
    """The phase's time ran out (the connect budget, or the total one)."""


class _Session:
    """One exchange's HTTP state: the headers, the session id, the era's version, the clock."""

    def __init__(
        self, target: ServerTarget, pool: httpcore.ConnectionPool, limit: int, connect: float, total: float
    ) -> None:
        self.url = target.url
        # Parsed (and normalised) by httpx once, not at each of the exchange's requests.
        self.address = httpx.URL(target.url)
        self.target = httpcore.URL(
            scheme=self.address.raw_scheme,
            host=self.address.raw_host,
            port=self.address.port,
            target=self.address.raw_path,
        )
        self.pool = pool
        self.cookies: httpx.Cookies | None = None  # this exchange's own, once a server sets one
        self.limit = limit
        self.started = time.monotonic()
        self.connect_deadline = self.started + min(connect, total)
        self.deadline = self.connect_deadline
        self.total_deadline = self.started + total
        # httpx's client puts its defaults first; of them only Connection is not replaced here.
        self.base = httpx.Headers({"Connection": "keep-alive"})
        self.base.update({"User-Agent": USER_AGENT, "Accept-Encoding": "identity"})
        self.base.update(target.headers)
        self.session_id: str | None = None
        self.version: str | None = None
        self.next_id = 1
        self.waiting_for = "its first answer"
        self.phase = "connect"
        # What the answer in flight is read as ("json", "sse"; "" for a notification's).
        self.reading = ""
        self.reader = plain.Reader()
        # Whether a response's rest is read after its answer (see `_rest`).
        self.reads_rest = True

    def headers(self, send: plain.Send | None = None) -> httpx.Headers:
        headers = self.base.copy()
        headers["accept"] = "application/json, text/event-stream"
        headers["content-type"] = "application/json"
        if self.session_id:
            headers[MCP_SESSION_ID] = self.session_id
        if self.version:
            headers[MCP_PROTOCOL_VERSION] = self.version
        if send is not None and _stamped(send):
            headers[MCP_PROTOCOL_VERSION] = plain.PROBE_VERSION
            headers[MCP_METHOD] = send.method
        return headers

    def timeout(self) -> dict[str, float]:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _Deadline
        return {"connect": left, "read": left, "write": left, "pool": left}

    def send(self, method: bytes, headers: httpx.Headers, body: bytes | None = None) -> httpcore.Response:
        """One request, its headers on the wire as httpx's client puts them (Host first, then the
        given ones, a cookie this exchange was given, the body's length); the response unread."""
        timeout = self.timeout()
        raw = headers.raw
        if "host" not in headers:
            raw.insert(0, (b"Host", self.address.netloc))
        if self.cookies:
            probe = httpx.Request(method.decode(), self.address)
            self.cookies.set_cookie_header(probe)
            raw.append((b"Cookie", probe.headers["cookie"].encode()))
        if body is not None and "content-length" not in headers:
            raw.append((b"Content-Length", str(len(body)).encode()))
        request = httpcore.Request(
            method, self.target, headers=raw, content=body, extensions={"timeout": timeout}
        )
        response = self.pool.handle_request(request)
        try:
            if any(key.lower() == b"set-cookie" for key, _ in response.headers):
                self._keep_cookies(method, response)
        except BaseException:
            response.close()  # its connection is given back (or dropped), never left checked out
            raise
        return response

    def _keep_cookies(self, method: bytes, response: httpcore.Response) -> None:
        if self.cookies is None:
            self.cookies = httpx.Cookies()
        request = httpx.Request(method.decode(), self.address)
        self.cookies.extract_cookies(
            httpx.Response(response.status, headers=response.headers, request=request)
        )

    def exchange(self, send: plain.Send) -> dict[str, Any] | None:
        """Send one message; the answer to a request (a JSON-RPC message), None for a notification."""
        request_id = None if send.notify else self.next_id
        self.reading = "" if send.notify else "json"
        if request_id is not None:
            self.next_id += 1
            self.waiting_for = send.method
        if send.method == "initialize":
            self.version = None  # the handshake is the negotiation: no probe-era header on it
        elif _stamped(send):
            self.version = plain.PROBE_VERSION
        body = plain.encode(plain.message(request_id, send))
        response = self.send(b"POST", self.headers(send), body)
        try:
            return self._read(response, send, request_id)
        finally:
            response.close()

    def _read(
        self, response: httpcore.Response, send: plain.Send, request_id: int | None
    ) -> dict[str, Any] | None:
        status = response.status
        if 300 <= status < 400 or status == 202 and request_id is not None:
            raise plain.OffPath  # a redirect (the SDK's origin rules decide), or no answer promised
        if request_id is None:
            if status >= 400:
                raise plain.OffPath
            self._rest(response, self._chunks(response))
            return None
        content_type = (_header(response, b"content-type") or "").lower()
        if status >= 400:
            return self._refusal(response, content_type, request_id)
        if send.method == "initialize" and (session_id := _header(response, MCP_SESSION_ID.encode())):
            self.session_id = session_id
        if content_type.startswith("application/json"):
            answer = plain.answer_to(self.reader.decode(b"".join(self._chunks(response))), request_id)
            if answer is None:
                raise plain.OffPath  # a notification where the SDK waits for the answer
            return answer
        if content_type.startswith("text/event-stream"):
            self.reading = "sse"
            return self._events(response, request_id)
        raise plain.OffPath

    def _refusal(self, response: httpcore.Response, content_type: str, request_id: int) -> dict[str, Any]:
        """An HTTP error answering a request, as the JSON-RPC error the SDK makes of it."""
        if content_type.startswith("application/json"):
            with_body = self.reader.decode(b"".join(self._chunks(response)))
            if isinstance(with_body, dict) and isinstance(with_body.get("error"), dict):
                return {"jsonrpc": "2.0", "id": request_id, "error": with_body["error"]}
            raise plain.OffPath
        code = plain.METHOD_NOT_FOUND if response.status == 404 and not self.session_id else None
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code or plain.INTERNAL_ERROR}}

    def _events(self, response: httpcore.Response, request_id: int) -> dict[str, Any]:
        events = plain.SseEvents(self.limit)
        chunks = self._chunks(response)
        for chunk in chunks:
            for event, data in events.feed(chunk):
                if event != "message" or not data:
                    continue  # another event type, or a priming event: passed over, as by the SDK
                answer = plain.answer_to(self.reader.decode(data), request_id)
                if answer is not None:
                    self._rest(response, chunks)
                    return answer
        raise plain.OffPath  # the stream ended without the answer: resuming it is the SDK's

    def _rest(self, response: httpcore.Response, chunks: Iterator[bytes]) -> None:
        """Read what is left of a response whose answer is in hand, so that its connection can
        serve the next request (a response closed before its end takes its connection with it).
        Only what arrives at once is waited for; a server that keeps the stream open, or sends
        more than the limit, loses the connection instead, and the session stops waiting."""
        if not self.reads_rest:
            return
        stream = response.extensions.get("network_stream")
        if not isinstance(stream, GraceStream):
            return
        stream.grace = REST_GRACE_SECONDS
        try:
            for _ in chunks:
                pass
        except (*TRANSPORT_ERROR, _Deadline, plain.OffPath):
            self.reads_rest = False  # the answer stands; only the connection is lost
        finally:
            stream.grace = None

    def _chunks(self, response: httpcore.Response) -> Iterator[bytes]:
        received = 0
        for chunk in response.iter_stream():
            received += len(chunk)
            if received > self.limit:
                raise plain.OffPath  # refused by the SDK path, with its own account of the bytes
            if time.monotonic() > self.deadline:
                raise _Deadline
            yield chunk

    def close(self) -> None:
        """End the session as the SDK does (a DELETE when the server gave an id), best effort."""
        if not self.session_id or time.monotonic() >= self.total_deadline:
            return
        self.deadline = self.total_deadline
        with contextlib.suppress(*TRANSPORT_ERROR, OutboundRefused, _Deadline, plain.OffPath):
            response = self.send(b"DELETE", self.headers())
            try:
                for _ in self._chunks(response):
                    pass  # read to its end, so the connection serves the next poll
            finally:
                response.close()

    def dropped(self, exc: Exception) -> PollError | None:
        """The SDK path's account of a server that dropped the connection while answering (a
        server that died cannot be asked again); None for a notification, which the SDK reads
        otherwise."""
        if self.reading == "sse":
            return PollError(
                # The SDK closes the request with an error first: nothing is pending when it says so.
                "crashed",
                f"{self.url}: connection closed before the answer to its first answer",
            )
        if self.reading == "json":
            return PollError("crashed", f"{self.url} dropped the connection while answering: {exc}")
        return None

    def timeout_error(self, connect: float, total: float) -> PollError:
        if self.phase == "connect":
            return PollError(
                "timeout",
                f"no answer to {self.waiting_for} within the connect timeout ({min(connect, total):g} s)",
            )
        return PollError("timeout", f"no answer to {self.waiting_for} within the total timeout ({total:g} s)")


def _drive(session: _Session, steps: Generator[plain.Send, dict[str, Any] | None, Any]) -> Any:
    """Run one part of the shared exchange over HTTP; its return value."""
    answer: dict[str, Any] | None = None
    while True:
        try:
            send = steps.send(answer)
        except StopIteration as done:
            return done.value
        if send.method == "tools/list" and session.phase == "connect":
            # Negotiated: the connect budget is spent, the rest of the total budget applies.
            session.phase, session.deadline = "tools/list", session.total_deadline
        answer = session.exchange(send)
        if send.method == "initialize" and answer is not None:
            negotiated = (answer.get("result") or {}).get("protocolVersion")
            session.version = negotiated if isinstance(negotiated, str) else None


def _count(session: _Session, listed: plain.Listed, result: FetchResult) -> None:
    """Prompts and resources, each counted only when advertised; a timeout keeps what was counted."""
    try:
        if listed.advertised("prompts"):
            result.prompts_count = _drive(session, plain.count_listing("prompts", listed.modern))
        if listed.advertised("resources"):
            result.resources_count = _drive(session, plain.count_listing("resources", listed.modern))
    except (_Deadline, TIMEOUT, *DROPPED):
        pass  # the tools arrived: a listing that could not be taken (in time) is unknown


def fetch(
    target: ServerTarget,
    *,
    connect_timeout: float,
    total_timeout: float,
    max_bytes: int,
    include_prompts_resources: Listings = True,
    outbound: OutboundPolicy,
    mode: str = "auto",
) -> FetchResult | None:
    """What ``fetch_tools`` returns for a Streamable HTTP server, or None when the SDK must speak
    for it. Raises ``PollError`` for a timeout or an outbound refusal, as the SDK path does."""
    if target.transport != "http":
        return None
    try:
        session = _Session(
            target,
            _pool(outbound, target.url),
            max_bytes + ENVELOPE_SLACK_BYTES,
            connect_timeout,
            total_timeout,
        )
    except Exception:
        return None  # headers httpx will not send, say: the SDK's account of them is the one recorded
    try:
        listed: plain.Listed = _drive(session, plain.tools_exchange(mode, max_bytes, session.reader))
        result = plain.result(listed, session.started, session.reader)
        if wants_listings(include_prompts_resources, listed.version):
            _count(session, listed, result)
    except plain.OffPath:
        return None
    except (_Deadline, TIMEOUT):
        raise session.timeout_error(connect_timeout, total_timeout) from None
    except OutboundRefused as exc:
        raise PollError("connect_error", f"refused by the outbound policy: {exc}") from None
    except DROPPED as exc:
        dropped = session.dropped(exc)
        if dropped is None:
            return None
        raise dropped from None
    except PollError:
        raise  # the exchange's own (payload over the limit, a repeated cursor): the SDK path's too
    except Exception:
        # A failed connection, a URL or header httpx refuses, anything unforeseen: the SDK's
        # account of it is the one recorded.
        return None
    finally:
        session.close()
    result.elapsed_seconds = time.monotonic() - session.started
    return result
