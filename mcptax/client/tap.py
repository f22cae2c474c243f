"""The tap on a transport's streams: it records the raw JSON-RPC ``result`` of every ``tools/list``
answer before the SDK turns it into pydantic models (the snapshot identity is the sha256 of exactly
what the server sent), counts its bytes against the limit, and ends the stream at the first fault.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import mcp_types
from mcp.shared.message import SessionMessage

from mcptax.client.target import (
    PollError,
    canonical_bytes,
    exception_summary,
    message_too_large,
    payload_too_large,
)


class Capture:
    """What the stream tap saw: pending requests, raw tools/list pages, and the first fault."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.pending: dict[Any, str] = {}
        self.pages: list[dict[str, Any]] = []
        self.payload_bytes = 0
        self.handshake: dict[str, Any] | None = None
        self.fault: PollError | None = None
        # The last HTTP error status seen: the SDK turns it into a JSON-RPC error without it.
        self.http_status: int | None = None

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
                    payload_too_large(self.payload_bytes, len(self.pages) + 1, size, self.max_bytes)
                )
                return
            self.pages.append(message.result)


class _ReadTap:
    """Read side of the tap: records answers and ends the stream once a fault is known."""

    def __init__(self, inner: Any, capture: Capture) -> None:
        self._inner = inner
        self._capture = capture

    @property
    def last_context(self) -> Any:
        # The SDK's dispatcher looks for this on context-carrying streams (HTTP transports).
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        if self._capture.fault is not None:
            raise anyio.EndOfStream
        item: SessionMessage | Exception = await self._inner.receive()
        if isinstance(item, Exception):
            self._capture.set_fault(
                PollError("protocol_error", f"unreadable message from the server ({exception_summary(item)})")
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
    def __init__(self, inner: Any, capture: Capture) -> None:
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


class TappedTransport:
    """An ``mcp.client`` Transport that wraps another one's streams in the tap."""

    def __init__(self, inner: AbstractAsyncContextManager[Any], capture: Capture) -> None:
        self._inner = inner
        self._capture = capture

    async def __aenter__(self) -> tuple[_ReadTap, _WriteTap]:
        read_stream, write_stream = await self._inner.__aenter__()
        return _ReadTap(read_stream, self._capture), _WriteTap(write_stream, self._capture)

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._inner.__aexit__(*exc_info)


def too_large_message(size: int, capture: Capture, message_limit: int) -> PollError:
    return message_too_large(size, capture.waiting_for(), capture.max_bytes, message_limit)
