"""Our own stdio transport (the SDK's reads a line of any length): each message is bounded, and
the server runs in its own process group which, whatever happens (success, error, timeout, caller
cancellation), gets its stdin closed, then is stopped by :mod:`mcptax.procgroup` and reaped."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import mcp_types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from mcptax.client.spawn import start_server
from mcptax.client.tap import Capture, too_large_message
from mcptax.client.target import PollError, ServerTarget, preview
from mcptax.procgroup import (
    killed_at_shutdown,
    stop_process_group_async,
    untrack_group,
    wait_for_exit,
)

STDERR_TAIL_BYTES = 2048
# Shutdown of a stdio server, in seconds: after stdin closes, after SIGTERM, after SIGKILL.
STDIN_CLOSE_GRACE = 0.5
SIGTERM_GRACE = 1.0
SIGKILL_GRACE = 2.0
# How long a crashed server may take to report its exit status, for the error message.
EXIT_STATUS_WAIT = 0.5


async def _stop_server(process: anyio.abc.Process, stdin_grace: float = STDIN_CLOSE_GRACE) -> None:
    """Close stdin (a well-behaved server exits on EOF), then stop its process group."""
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        if process.stdin is not None:
            await process.stdin.aclose()
    await wait_for_exit(process, stdin_grace)
    await stop_process_group_async(process, term_grace=SIGTERM_GRACE, kill_grace=SIGKILL_GRACE)


class _Pumps:
    """The three tasks between a server's pipes and the session's streams, and what they share:
    the tail of stderr (a crash report's most useful part) and whether we are stopping the server."""

    def __init__(self, process: anyio.abc.Process, capture: Capture, message_limit: int) -> None:
        self.process = process
        self.capture = capture
        self.message_limit = message_limit
        self.to_session, self.from_server = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        self.to_server, self.from_session = anyio.create_memory_object_stream[SessionMessage](16)
        self.stderr_tail = bytearray()
        self.stderr_done = anyio.Event()
        self.shutting_down = False

    def crashed(self, what: str) -> PollError:
        capture, process = self.capture, self.process
        if killed_at_shutdown(process.pid):
            # We killed it: not evidence against the server.
            return PollError(
                "internal_error",
                f"the worker shut down while waiting for {capture.waiting_for()}; the server was stopped",
            )
        code = process.returncode
        status = f"exited with code {code}" if code is not None else "is still running"
        tail = bytes(self.stderr_tail).decode("utf-8", errors="replace").strip()
        return PollError(
            "crashed",
            f"{what} while waiting for {capture.waiting_for()}; the process {status}"
            + (f"; stderr ends: {tail[-500:]}" if tail else ""),
        )

    async def deliver(self, line: bytes) -> bool:
        """Hand one line to the session; False (a fault set) for a line too long or not JSON-RPC."""
        capture = self.capture
        if not line.strip():
            return True
        if len(line) > self.message_limit:
            capture.set_fault(too_large_message(len(line), capture, self.message_limit))
            return False
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            capture.set_fault(
                PollError(
                    "protocol_error",
                    f"the server wrote a line that is not a JSON-RPC message while answering "
                    f"{capture.waiting_for()}: {preview(line)!r}",
                )
            )
            return False
        await self.to_session.send(SessionMessage(message))
        return True

    async def stdout(self) -> None:
        process, capture, limit = self.process, self.capture, self.message_limit
        assert process.stdout is not None
        buffer = bytearray()
        scan_from = 0
        async with self.to_session:
            try:
                async for chunk in process.stdout:
                    buffer += chunk
                    while (newline := buffer.find(b"\n", scan_from)) >= 0:
                        line = bytes(buffer[:newline])
                        del buffer[: newline + 1]
                        scan_from = 0
                        if not await self.deliver(line):
                            return
                    scan_from = len(buffer)
                    if len(buffer) > limit:
                        # Stop reading now: the rest of this message is never buffered.
                        capture.set_fault(too_large_message(len(buffer), capture, limit))
                        return
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            if self.shutting_down:
                return
            await wait_for_exit(process, EXIT_STATUS_WAIT)
            # Its last words on stderr are the most useful part of a crash report.
            with anyio.move_on_after(EXIT_STATUS_WAIT):
                await self.stderr_done.wait()
            if buffer.strip():
                what = f"the server stopped in the middle of a message ({len(buffer)} bytes unterminated)"
            else:
                what = "the server closed its output"
            capture.set_fault(self.crashed(what))

    async def stderr(self) -> None:
        assert self.process.stderr is not None
        try:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for chunk in self.process.stderr:
                    self.stderr_tail.extend(chunk)
                    del self.stderr_tail[:-STDERR_TAIL_BYTES]
        finally:
            self.stderr_done.set()

    async def stdin(self) -> None:
        process = self.process
        assert process.stdin is not None
        async with self.from_session:
            async for item in self.from_session:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                try:
                    await process.stdin.send(data.encode("utf-8"))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    if not self.shutting_down:
                        await wait_for_exit(process, EXIT_STATUS_WAIT)
                        self.capture.set_fault(self.crashed("the server stopped reading"))
                        await self.to_session.aclose()
                    return


@asynccontextmanager
async def bounded_stdio(
    target: ServerTarget,
    capture: Capture,
    message_limit: int,
    process: anyio.abc.Process | None = None,
    stdin_grace: float = STDIN_CLOSE_GRACE,
) -> AsyncIterator[tuple[Any, Any]]:
    """The transport over `target`'s server: started here (the SDK's default environment with the
    target's `env` over it), or `process` when the caller started it already (:mod:`.spawn`).
    When done, the server has `stdin_grace` seconds to exit on its own before SIGTERM."""
    if process is None:
        # Until it is reaped below, a dying worker kills the group (mcptax.procgroup, config/celery.py).
        process = await start_server(target, get_default_environment() | dict(target.env))
    pumps = _Pumps(process, capture, message_limit)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pumps.stdout)
            tg.start_soon(pumps.stderr)
            tg.start_soon(pumps.stdin)
            try:
                yield pumps.from_server, pumps.to_server
            finally:
                pumps.shutting_down = True
                # Shielded so that a timeout or a cancelled caller still stops and reaps the server.
                with anyio.CancelScope(shield=True):
                    await _stop_server(process, stdin_grace)
                tg.cancel_scope.cancel()
    finally:
        # Only reached without the shielded stop if the task group failed to start.
        if process.returncode is None:
            with anyio.CancelScope(shield=True):
                await _stop_server(process)
        untrack_group(process.pid)
