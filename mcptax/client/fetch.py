"""The fetch API: connect, negotiate, read every ``tools/list`` page, count prompts and
resources, disconnect; for async callers and, through a private event loop, synchronous ones."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import anyio.abc
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcptax.client import fasthttp
from mcptax.client.errors import classify
from mcptax.client.http import sse, streamable_http
from mcptax.client.stdio import STDIN_CLOSE_GRACE, bounded_stdio
from mcptax.client.tap import Capture, TappedTransport
from mcptax.client.target import (
    ENVELOPE_SLACK_BYTES,
    MAX_PAGES,
    FetchResult,
    Listings,
    PollError,
    ServerTarget,
    repeated_cursor,
    too_many_pages,
    wants_listings,
)
from mcptax.outbound import OutboundPolicy

# Public addresses only: a caller that may reach further passes its own policy.
PUBLIC_ONLY = OutboundPolicy()


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


def _transport(
    target: ServerTarget,
    capture: Capture,
    message_limit: int,
    connect_timeout: float,
    total_timeout: float,
    outbound: OutboundPolicy,
    process: anyio.abc.Process | None,
    stdin_grace: float | None,
) -> AbstractAsyncContextManager[Any]:
    """The byte-bounded transport for `target`'s kind (stdio, Streamable HTTP or SSE), before the tap."""
    if target.transport == "stdio":
        return bounded_stdio(
            target,
            capture,
            message_limit,
            process,
            STDIN_CLOSE_GRACE if stdin_grace is None else stdin_grace,
        )
    if target.transport == "http":
        return streamable_http(target, capture, message_limit, connect_timeout, total_timeout, outbound)
    return sse(target, capture, message_limit, connect_timeout, total_timeout, outbound)


async def _count_prompts_resources(client: Client, result: FetchResult) -> None:
    """Prompts and resources, each counted only when the server advertises it."""
    capabilities = client.server_capabilities
    if capabilities.prompts is not None:
        result.prompts_count = await _count_listing(client.list_prompts, "prompts")
    if capabilities.resources is not None:
        result.resources_count = await _count_listing(client.list_resources, "resources")


async def fetch_tools(
    target: ServerTarget,
    *,
    connect_timeout: float,
    total_timeout: float,
    max_bytes: int,
    include_prompts_resources: Listings = True,
    outbound: OutboundPolicy = PUBLIC_ONLY,
    process: anyio.abc.Process | None = None,
    stdin_grace: float | None = None,
    mode: str = "auto",
) -> FetchResult:
    """Connect, negotiate, fetch every ``tools/list`` page, and disconnect.

    ``connect_timeout`` bounds starting the server (or the TCP connect) plus the handshake;
    ``total_timeout`` bounds the whole exchange (stopping a stdio server may take up to a few
    seconds more, shielded). ``max_bytes`` bounds the sum of the raw ``tools/list`` results
    (``payload_bytes``). Prompts and resources are counted only when advertised, and only with
    the time left; a count that could not be taken is ``None``. ``include_prompts_resources`` may
    be a test of the negotiated protocol version (count only for the era the caller keeps). HTTP and SSE connections go
    only where ``outbound`` allows (a refusal is a ``connect_error`` naming the address's class).

    A stdio ``target`` whose server the caller started already (:mod:`.spawn`) passes it as
    ``process``; it is stopped and reaped here like one started here. ``stdin_grace`` is how long
    a stdio server may take to exit on its own once its stdin closes (default 0.5 s) before it is
    sent SIGTERM: a one-shot measurement, which only wants the server gone, passes 0.

    ``mode`` is the SDK's: ``auto`` probes the 2026-07-28 revision first and falls back to the
    ``initialize`` handshake; ``legacy`` asks in the handshake era only (what a client of the 2025
    revisions receives).

    Raises ``PollError`` with one of the outcomes in ``OUTCOMES``.
    """
    _validate_limits(connect_timeout, total_timeout, max_bytes)
    capture = Capture(max_bytes)
    message_limit = max_bytes + ENVELOPE_SLACK_BYTES
    started = anyio.current_time()
    wall_started = time.monotonic()
    inner = _transport(
        target, capture, message_limit, connect_timeout, total_timeout, outbound, process, stdin_grace
    )

    result: FetchResult | None = None
    phase = "connect"
    scope = anyio.CancelScope(deadline=started + min(connect_timeout, total_timeout))
    try:
        with scope:
            async with Client(TappedTransport(inner, capture), cache=None, mode=mode) as client:
                phase = "tools/list"
                # One scope for the whole exchange: the connect budget is spent, the rest of the
                # total budget now applies.
                scope.deadline = started + total_timeout
                result = await _list_all_tools(client, capture)
                result.handshake = capture.handshake
                if wants_listings(include_prompts_resources, result.protocol_version):
                    phase = "prompts/list and resources/list"
                    await _count_prompts_resources(client, result)
    except Exception as exc:
        # A failure after the tools arrived (counting prompts, tearing down) loses nothing.
        if result is None:
            if isinstance(exc, PollError):
                raise
            if capture.fault is not None:
                raise capture.fault from exc
            if scope.cancel_called:
                raise _timeout_error(phase, capture, connect_timeout, total_timeout) from exc
            raise classify(exc, target, capture) from exc
    if result is None:
        if capture.fault is not None:
            raise capture.fault
        raise _timeout_error(phase, capture, connect_timeout, total_timeout)
    result.elapsed_seconds = time.monotonic() - wall_started
    return result


def _timeout_error(phase: str, capture: Capture, connect_timeout: float, total_timeout: float) -> PollError:
    if phase == "connect":
        return PollError(
            "timeout",
            f"no answer to {capture.waiting_for()} within the connect timeout "
            f"({min(connect_timeout, total_timeout):g} s)",
        )
    return PollError(
        "timeout", f"no answer to {capture.waiting_for()} within the total timeout ({total_timeout:g} s)"
    )


async def _list_all_tools(client: Client, capture: Capture) -> FetchResult:
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
            raise repeated_cursor(cursor)
        seen.add(cursor)
    else:
        raise too_many_pages()
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
    include_prompts_resources: Listings = True,
    outbound: OutboundPolicy = PUBLIC_ONLY,
    mode: str = "auto",
    fast: bool = True,
) -> FetchResult:
    """``fetch_tools`` for synchronous callers (Celery tasks, management commands).

    A Streamable HTTP server is asked through the SDK-free fast path first (:mod:`.fasthttp`:
    the same messages, limits, timeouts and outbound policy, the same result); a server that
    leaves it is asked again through the SDK. ``fast=False`` goes to the SDK at once.
    """
    if fast and target.transport == "http":
        _validate_limits(connect_timeout, total_timeout, max_bytes)
        result = fasthttp.fetch(
            target,
            connect_timeout=connect_timeout,
            total_timeout=total_timeout,
            max_bytes=max_bytes,
            include_prompts_resources=include_prompts_resources,
            outbound=outbound,
            mode=mode,
        )
        if result is not None:
            return result
    call = functools.partial(
        fetch_tools,
        target,
        connect_timeout=connect_timeout,
        total_timeout=total_timeout,
        max_bytes=max_bytes,
        include_prompts_resources=include_prompts_resources,
        outbound=outbound,
        mode=mode,
    )
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(call)
    # Called from a thread that already runs an event loop (an async view, a notebook): a
    # private loop in a worker thread, since this loop cannot be re-entered.
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, call).result()
