"""Streamable HTTP and legacy SSE, with every response body read through a byte-counting httpx
transport (over-size input is refused, never truncated) whose connections go only where the
outbound policy allows (:mod:`mcptax.outbound`: resolved once, connected to the checked address)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx2
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from mcptax.client.tap import Capture, too_large_message
from mcptax.client.target import PollError, ServerTarget
from mcptax.outbound import AsyncPinnedTransport, OutboundPolicy, OutboundRefused

# A legacy SSE connection carries the whole session on one response; allow the handshake and the
# prompts/resources listings on top of the tools.
SSE_STREAM_SLACK_BYTES = 4 * 1024 * 1024


class _ResponseTooLarge(httpx2.StreamError):
    # A StreamError so the SDK's JSON-response path turns it into an error for the pending request
    # instead of crashing its task group; the capture holds the real reason.
    pass


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, limit: int, capture: Capture) -> None:
        self._inner = inner
        self._limit = limit
        self._capture = capture

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = 0
        async for chunk in self._inner:
            received += len(chunk)
            if received > self._limit:
                self._capture.set_fault(too_large_message(received, self._capture, self._limit))
                raise _ResponseTooLarge(f"response exceeded {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedTransport(httpx2.AsyncBaseTransport):
    """Counts every response body's bytes as they arrive and stops reading past the limit; opens
    connections only where ``policy`` allows."""

    def __init__(self, limit: int, capture: Capture, policy: OutboundPolicy) -> None:
        self._inner = AsyncPinnedTransport(policy)
        self._limit = limit
        self._capture = capture

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except OutboundRefused as exc:
            # The capture keeps the reason (the SDK may wrap or swallow what we raise); the SDK
            # sees an ordinary connection failure and ends the session.
            self._capture.set_fault(PollError("connect_error", f"refused by the outbound policy: {exc}"))
            raise httpx2.ConnectError(str(exc), request=request) from exc
        if response.status_code >= 400 and request.method == "POST":
            # A GET for the optional notification stream may well be refused (405); only an
            # answer to a message is evidence about the failure.
            self._capture.http_status = response.status_code
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


@asynccontextmanager
async def streamable_http(
    target: ServerTarget,
    capture: Capture,
    message_limit: int,
    connect_timeout: float,
    total_timeout: float,
    policy: OutboundPolicy,
) -> AsyncIterator[tuple[Any, Any]]:
    timeout = httpx2.Timeout(total_timeout, connect=connect_timeout)
    async with (
        httpx2.AsyncClient(
            headers=_http_headers(target),
            timeout=timeout,
            transport=_CappedTransport(message_limit, capture, policy),
        ) as http_client,
        streamable_http_client(
            target.url, http_client=http_client, max_sse_event_size=message_limit
        ) as streams,
    ):
        yield streams


def sse(
    target: ServerTarget,
    capture: Capture,
    message_limit: int,
    connect_timeout: float,
    total_timeout: float,
    policy: OutboundPolicy,
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
            transport=_CappedTransport(stream_limit, capture, policy),
        )

    return sse_client(
        target.url,
        headers=dict(target.headers),
        timeout=connect_timeout,
        sse_read_timeout=total_timeout,
        httpx_client_factory=factory,
    )
