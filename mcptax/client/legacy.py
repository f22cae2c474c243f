"""The SDK-free fast path of a one-shot measurement: the exchange the SDK's ``Client`` has with a
stdio server, spoken directly, for servers of both protocol eras (a ``server/discover`` probe
answered by a modern server, or the ``initialize`` handshake that follows when the server does not
know the probe or names only handshake-era versions).

`mcp-tax measure` starts half a dozen servers at once; importing the SDK costs about 0.8 s of CPU
that those servers need to boot on a small machine. So the command asks every server here first
and loads the SDK only for the servers that leave the plain path.

Exactness comes from staying on one well-trodden path, and leaving it at the first doubt:

- the messages are byte for byte what the SDK sends on that path (the probe, ``initialize``, the
  ``initialized`` notification, ``tools/list`` with its cursor), written once in :mod:`.plain`
  (shared with the poller's HTTP fast path); a test records both clients against the same
  servers and compares, and checks the constants there against the SDK's;
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
from typing import Any

import anyio
import anyio.abc

from mcptax.client import plain
from mcptax.client.plain import (
    CLIENT_INFO,
    HANDSHAKE_VERSION,
    HANDSHAKE_VERSIONS,
    MODERN_VERSIONS,
    PROBE_VERSION,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcptax.client.plain import OffPath as _OffPath
from mcptax.client.plain import tool_is_plain as _tool_is_plain
from mcptax.client.target import (
    ENVELOPE_SLACK_BYTES,
    FetchResult,
    PollError,
    message_too_large,
)
from mcptax.procgroup import stop_process_group_async, untrack_group

__all__ = [
    "CLIENT_INFO",
    "HANDSHAKE_VERSION",
    "HANDSHAKE_VERSIONS",
    "MODERN_VERSIONS",
    "PROBE_VERSION",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "_tool_is_plain",
    "fetch_handshake_era",
]


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
            answer = plain.answer_to(plain.decode(line), request_id)
            if answer is not None:
                return answer


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


async def _talk(exchange: _Exchange, started: float) -> FetchResult:
    """Drive the shared exchange (:func:`plain.tools_exchange`) over the server's stdio."""
    steps = plain.tools_exchange("auto", exchange.max_bytes)
    answer: dict[str, Any] | None = None
    while True:
        try:
            send = steps.send(answer)
        except StopIteration as done:
            return plain.result(done.value, started)
        request_id = await exchange.send(send.method, send.params, notify=send.notify)
        answer = None if send.notify else await exchange.answer(request_id)


async def _drain(exchange: _Exchange) -> None:
    if exchange.stderr is None:
        return
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        async for _chunk in exchange.stderr:
            pass
