"""Scripted Streamable-HTTP-like upstream for proxy tests (not a real MCP server).

POST answers with `Mcp-Session-Id: sess-fixed` and `X-Upstream: yes`, and echoes what it
received (body sha256, the request's Mcp-Session-Id, its path). By default the answer is an
SSE stream of two events, the second held back until someone POSTs to `/release` (or HOLD
seconds pass, a guard against a hung test), so a test can see whether a proxy passes the first
event on before the stream ends; with `X-Want-Json: 1` it is one JSON body at once.

Usage: python sse_upstream.py PORT [HOLD]
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn

HOLD = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
_released: asyncio.Event | None = None


def released() -> asyncio.Event:
    # Created lazily: it must belong to the event loop uvicorn runs.
    global _released
    if _released is None:
        _released = asyncio.Event()
    return _released


async def app(
    scope: dict[str, Any],
    receive: Callable[[], Awaitable[dict[str, Any]]],
    send: Callable[..., Awaitable[None]],
) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["path"] == "/release":
        released().set()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    headers = {name.decode().lower(): value.decode() for name, value in scope["headers"]}
    request = json.loads(body) if body else {}
    echo = {
        "body_sha256": hashlib.sha256(body).hexdigest(),
        "session_header": headers.get("mcp-session-id"),
        "path": scope["path"],
        "query": scope["query_string"].decode(),
    }
    common = [(b"mcp-session-id", b"sess-fixed"), (b"x-upstream", b"yes")]
    result = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": echo}).encode()
    if headers.get("x-want-json") == "1":
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [*common, (b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": result})
        return
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [*common, (b"content-type", b"text/event-stream")],
        }
    )
    progress = json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
    # A comment, a data-less priming event and CRLF line ends: all legal SSE a proxy must cope with.
    await send({"type": "http.response.body", "body": b": hello\r\nid: 0\r\n\r\n", "more_body": True})
    await send(
        {
            "type": "http.response.body",
            "body": f"event: message\r\ndata: {progress}\r\n\r\n".encode(),
            "more_body": True,
        }
    )
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(released().wait(), HOLD)
    await send(
        {
            "type": "http.response.body",
            "body": b"event: message\ndata: " + result + b"\n\n",
            "more_body": False,
        }
    )


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
